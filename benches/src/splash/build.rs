//! Building a program with a macro file, and reading the images it writes.

use super::*;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Build {
    Pthread,
    Svm,
}

impl Build {
    pub(super) fn label(self) -> &'static str {
        match self {
            Build::Pthread => "pthread",
            Build::Svm => "svm",
        }
    }
}

pub(super) fn copy_dir(src: &Path, dst: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dst).map_err(|e| format!("creating {}: {e}", dst.display()))?;
    let rd = std::fs::read_dir(src).map_err(|e| format!("reading {}: {e}", src.display()))?;
    for e in rd {
        let e = e.map_err(|e| format!("reading {}: {e}", src.display()))?;
        let (from, to) = (e.path(), dst.join(e.file_name()));
        let ft = e
            .file_type()
            .map_err(|e| format!("{}: {e}", from.display()))?;
        if ft.is_dir() {
            copy_dir(&from, &to)?;
        } else if ft.is_file() {
            std::fs::copy(&from, &to)
                .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))?;
        }
    }
    Ok(())
}

/// The object list (`OBJS = a.o b.o \ ...`) of a program's Makefile.
pub(super) fn makefile_objs(makefile: &str) -> Vec<String> {
    let mut text = String::new();
    let mut on = false;
    for l in makefile.lines() {
        if !on && l.trim_start().starts_with("OBJS") {
            on = true;
            text.push_str(l.split_once('=').map_or("", |x| x.1));
        } else if on {
            text.push_str(l);
        }
        if on {
            if let Some(t) = text.strip_suffix('\\') {
                text = format!("{t} ");
            } else {
                break;
            }
        }
    }
    text.split_whitespace().map(String::from).collect()
}

pub(super) fn run_tool(cmd: Command, what: &str) -> Result<(), String> {
    let r = util::run_with_deadline(cmd, Duration::from_secs(600));
    if r.ok {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}): {}",
            r.status,
            util::tail(&format!("{}{}", r.stdout, r.stderr), 8)
        ))
    }
}

/// m4 of `src` in `dir` into `dst` with the macro files.
pub(super) fn m4(dir: &Path, macros: &[PathBuf], src: &str, dst: &str) -> Result<(), String> {
    let out = std::fs::File::create(dir.join(dst)).map_err(|e| format!("{dst}: {e}"))?;
    let r = Command::new("m4")
        .current_dir(dir)
        .args(["-Ulen", "-Uindex"])
        .args(macros)
        .arg(src)
        .stdout(out)
        .stderr(std::process::Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run m4: {e} (install m4)"))?;
    if r.status.success() {
        Ok(())
    } else {
        Err(format!(
            "m4 {src}: {}",
            String::from_utf8_lossy(&r.stderr).trim()
        ))
    }
}

/// Copies the program into `dir`, runs m4 on its `.H` and `.C` files and compiles it;
/// returns the executable.
pub(super) fn build(
    prog: &Prog,
    codes: &Path,
    dir: &Path,
    macros: &[PathBuf],
    common_cflags: &[String],
    svm_cflags: &[String],
    svm_libs: &[String],
) -> Result<PathBuf, String> {
    let _ = std::fs::remove_dir_all(dir);
    copy_dir(&codes.join(prog.dir), dir)?;
    let makefile = std::fs::read_to_string(dir.join("Makefile"))
        .map_err(|e| format!("{}/Makefile: {e}", prog.dir))?;
    // Headers first; one may include another (m4 `include`), so retry until none is left.
    let mut pending: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".H"))
        .collect();
    pending.sort();
    while !pending.is_empty() {
        let mut left = Vec::new();
        let mut last_err = String::new();
        for h in &pending {
            let out = format!("{}.h", h.trim_end_matches(".H"));
            if let Err(e) = m4(dir, macros, h, &out) {
                last_err = e;
                left.push(h.clone());
            }
        }
        if left.len() == pending.len() {
            return Err(last_err);
        }
        pending = left;
    }
    let objs = makefile_objs(&makefile);
    if objs.is_empty() {
        return Err(format!("{}/Makefile: no OBJS", prog.dir));
    }
    let mut srcs = Vec::new();
    for o in &objs {
        let stem = o.trim_end_matches(".o");
        m4(dir, macros, &format!("{stem}.C"), &format!("{stem}.c"))?;
        srcs.push(format!("{stem}.c"));
    }
    let exe = dir.join("prog");
    let mut cc = Command::new("cc");
    cc.current_dir(dir)
        .args(common_cflags)
        .args(prog.cflags)
        .args(svm_cflags)
        .args(&srcs)
        .args(prog.extra_srcs)
        .args(svm_libs)
        .arg("-o")
        .arg(&exe)
        .arg("-lm")
        .args(prog.libs);
    run_tool(cc, "cc")?;
    Ok(exe)
}

/// A small decoder of volrend's LZW-compressed grayscale TIFF images (libtiff, which volrend
/// needs anyway): prints `WIDTH HEIGHT\n` and the raw pixels.
pub(super) const TIFFRAW_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <tiffio.h>
int main(int argc, char **argv) {
  TIFF *t; uint32_t w = 0, h = 0, row; tsize_t n; unsigned char *buf;
  if (argc != 2 || (t = TIFFOpen(argv[1], "r")) == NULL) return 2;
  TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &w);
  TIFFGetField(t, TIFFTAG_IMAGELENGTH, &h);
  n = TIFFScanlineSize(t);
  if (n <= 0 || (buf = malloc((size_t)n)) == NULL) return 3;
  printf("%u %u\n", (unsigned)w, (unsigned)h);
  for (row = 0; row < h; row++) {
    if (TIFFReadScanline(t, buf, row, 0) < 0) return 4;
    fwrite(buf, 1, (size_t)n, stdout);
  }
  TIFFClose(t);
  return 0;
}
"#;

/// The decoder, once built (`None`: images are compared as files).
pub(super) static TIFFRAW: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

pub(super) fn build_tiffraw(scratch: &Path) -> Result<PathBuf, String> {
    let src = scratch.join("tiffraw.c");
    write(&src, TIFFRAW_C)?;
    let exe = scratch.join("tiffraw");
    let mut cc = Command::new("cc");
    cc.arg("-O2").arg(&src).arg("-o").arg(&exe).arg("-ltiff");
    run_tool(
        cc,
        "cc tiffraw.c (needs libtiff's headers: Debian libtiff-dev)",
    )?;
    Ok(exe)
}

/// The pixels of a TIFF image (through the decoder), or the file's bytes without it.
pub(super) fn image_pixels(path: &Path) -> Option<Vec<u8>> {
    if let Some(dec) = TIFFRAW.get() {
        let out = Command::new(dec).arg(path).output().ok()?;
        if out.status.success() {
            let at = out.stdout.iter().position(|&b| b == b'\n')?;
            return Some(out.stdout[at + 1..].to_vec());
        }
    }
    std::fs::read(path).ok()
}

/// The image files of a run, sorted by name, with their contents (volrend: the pixels).
pub(super) fn images(prog: &Prog, run: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(run.join("inputs"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().into_string().ok()?;
            let keep = match prog.sig {
                Sig::RayImage => n.ends_with(".rl"),
                Sig::VolImages => n.ends_with(".tiff"),
                _ => false,
            };
            if keep && prog.sig == Sig::VolImages {
                Some((n, image_pixels(&e.path())?))
            } else if keep {
                Some((n, std::fs::read(e.path()).ok()?))
            } else {
                None
            }
        })
        .collect();
    v.sort();
    v
}
