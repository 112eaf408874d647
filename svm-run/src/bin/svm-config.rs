//! `svm-config`: the compiler and linker flags for svm's C personalities (`docs/splash.md`).
//!
//! ```text
//! m4 -Ulen -Uindex $(svm-config --m4 splash) x.C > x.c
//! cc -O2 $(svm-config --cflags) x.c $(svm-config --libs splash) -o x -lm
//! ```
//!
//! In the build tree, source paths (headers, the m4 macro file, the `main` wrapper stub) are
//! those of the source tree this binary was built from, and the library directory is the
//! directory of the running executable, where cargo also puts the personalities' shared
//! libraries (`target/<profile>/`). Installed (`make install`, docs/install.md) as
//! `PREFIX/bin/svm-config` next to `PREFIX/include/svm/svm.h`, it uses the installed files:
//! headers in `PREFIX/include/svm`, libraries in `PREFIX/lib`, the m4 file and stubs in
//! `PREFIX/share/svm`.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Exit status for a bad command line.
const EXIT_USAGE: u8 = 2;

/// One C personality: its library and what a program needs besides `-l`.
struct Personality {
    /// Name on the command line (`--libs NAME`).
    name: &'static str,
    /// Library name for `-l` (`libNAME.so`).
    lib: &'static str,
    /// Include directory, relative to the workspace root.
    include: &'static str,
    /// The `main` wrapper stub (relative to the workspace root): when set, `--libs` puts it on
    /// the command line and adds `-Wl,--wrap=main -Wl,-z,now`.
    wrap_main_stub: Option<&'static str>,
    /// The m4 macro file (relative to the workspace root), for `--m4`.
    m4: Option<&'static str>,
}

/// Every personality. To give one the `main` wrapper (e.g. cvm), fill in `wrap_main_stub`.
const PERSONALITIES: &[Personality] = &[
    Personality {
        name: "svm",
        lib: "svm",
        include: "svm-api-c/include",
        wrap_main_stub: None,
        m4: None,
    },
    Personality {
        name: "splash",
        lib: "svm_splash",
        include: "svm-api-splash/include",
        wrap_main_stub: Some("svm-api-splash/stub/svm_splash_stub.c"),
        m4: Some("svm-api-splash/macros/c.m4.svm"),
    },
    Personality {
        name: "smi",
        lib: "svm_smi",
        include: "svm-api-smi/include",
        wrap_main_stub: None,
        m4: None,
    },
    Personality {
        name: "cvm",
        lib: "svm_cvm",
        include: "svm-api-cvm/include",
        wrap_main_stub: Some("svm-api-cvm/stub/svm_cvm_stub.c"),
        m4: None,
    },
    Personality {
        name: "deck",
        lib: "svm_deck",
        include: "svm-api-deck/include",
        wrap_main_stub: None,
        m4: None,
    },
];

const USAGE: &str = "\
Usage: svm-config OPTION...

Prints the flags that build C programs against svm's personalities (on one line, in the order
of the options).

Options:
  --cflags          -I flags for every personality's include directory
  --libs NAME       link flags for personality NAME (svm, splash, smi, cvm, deck; svm is
                    the native C API of svm.h)
  --m4 NAME         absolute path of the m4 macro file of NAME (splash only)
  --libdir          the directory holding the personalities' shared libraries
  --help            this text

A SPLASH-2 program:
  m4 -Ulen -Uindex $(svm-config --m4 splash) x.C > x.c
  cc -O2 $(svm-config --cflags) x.c $(svm-config --libs splash) -o x -lm
  svmrun -n 4 ./x -p4

Exit status: 0, or 2 for a bad command line or an unknown personality.
See docs/splash.md.";

/// Where things are: the source tree and the library directory.
struct Layout {
    root: PathBuf,
    libdir: PathBuf,
    /// Installed into a prefix: `root` is the prefix, and files come from its `include/svm`
    /// and `share/svm`.
    installed: bool,
}

impl Layout {
    /// The source tree this binary was built from, and the directory of the running binary.
    fn current() -> Result<Layout, String> {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = manifest
            .parent()
            .ok_or_else(|| format!("{} has no parent directory", manifest.display()))?
            .to_path_buf();
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the svm-config executable: {e}"))?;
        let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
        let libdir = exe
            .parent()
            .ok_or_else(|| format!("{} has no parent directory", exe.display()))?
            .to_path_buf();
        if let Some(prefix) = libdir.parent().filter(|_| libdir.ends_with("bin")) {
            if prefix.join("include/svm/svm.h").is_file() {
                return Ok(Layout {
                    root: prefix.to_path_buf(),
                    libdir: prefix.join("lib"),
                    installed: true,
                });
            }
        }
        Ok(Layout {
            root,
            libdir,
            installed: false,
        })
    }

    /// A file of the source tree (`rel` to its root), or its installed copy in `share/svm`.
    fn file(&self, rel: &str) -> PathBuf {
        match (self.installed, Path::new(rel).file_name()) {
            (true, Some(name)) => self.root.join("share/svm").join(name),
            _ => self.root.join(rel),
        }
    }

    fn cflags(&self) -> Vec<String> {
        if self.installed {
            return vec![format!("-I{}", self.root.join("include/svm").display())];
        }
        PERSONALITIES
            .iter()
            .map(|p| self.root.join(p.include))
            .filter(|dir| dir.is_dir())
            .map(|dir| format!("-I{}", dir.display()))
            .collect()
    }

    fn libs(&self, p: &Personality) -> Vec<String> {
        let lib = self.libdir.display();
        let mut flags = Vec::new();
        if let Some(stub) = p.wrap_main_stub {
            flags.push(self.file(stub).display().to_string());
        }
        flags.push(format!("-L{lib}"));
        flags.push(format!("-Wl,-rpath,{lib}"));
        flags.push(format!("-l{}", p.lib));
        if p.wrap_main_stub.is_some() {
            flags.push("-Wl,--wrap=main".to_string());
            flags.push("-Wl,-z,now".to_string());
        }
        flags.push("-pthread".to_string());
        flags
    }

    fn m4(&self, p: &Personality) -> Result<String, String> {
        match p.m4 {
            Some(file) => Ok(self.file(file).display().to_string()),
            None => Err(format!(
                "personality `{}` has no m4 macro file (only {} has)",
                p.name,
                names(PERSONALITIES.iter().filter(|p| p.m4.is_some()))
            )),
        }
    }
}

fn names<'a>(ps: impl Iterator<Item = &'a Personality>) -> String {
    ps.map(|p| p.name).collect::<Vec<_>>().join(", ")
}

fn personality(name: &str) -> Result<&'static Personality, String> {
    PERSONALITIES
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            format!(
                "unknown personality `{name}` (expected one of: {})",
                names(PERSONALITIES.iter())
            )
        })
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Request {
    Help,
    /// Print these words on one line.
    Words(Vec<String>),
}

/// Interprets the arguments (without the program name).
fn run(args: &[String], layout: &Layout) -> Result<Request, String> {
    if args.is_empty() {
        return Err("no option given".to_string());
    }
    let mut words = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (opt, inline) = match arg.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{opt} needs a personality name ({what})"))
        };
        match opt {
            "--help" | "-h" => return Ok(Request::Help),
            "--cflags" => words.extend(layout.cflags()),
            "--libdir" => words.push(layout.libdir.display().to_string()),
            "--libs" => {
                let name = value("svm, splash, smi, cvm or deck")?;
                words.extend(layout.libs(personality(&name)?));
            }
            "--m4" => {
                let name = value("splash")?;
                words.push(layout.m4(personality(&name)?)?);
            }
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(Request::Words(words))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = Layout::current().and_then(|layout| run(&args, &layout));
    match result {
        Ok(Request::Help) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Request::Words(words)) => {
            println!("{}", words.join(" "));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("svm-config: {e}\nTry `svm-config --help`.");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout {
            root: PathBuf::from("/src/svm"),
            libdir: PathBuf::from("/build/target/debug"),
            installed: false,
        }
    }

    #[test]
    fn an_installed_layout_uses_the_prefix() {
        let l = Layout {
            root: PathBuf::from("/opt/svm"),
            libdir: PathBuf::from("/opt/svm/lib"),
            installed: true,
        };
        assert_eq!(l.cflags(), ["-I/opt/svm/include/svm"]);
        assert_eq!(
            l.libs(personality("splash").unwrap())[..2],
            [
                "/opt/svm/share/svm/svm_splash_stub.c".to_string(),
                "-L/opt/svm/lib".to_string()
            ]
        );
        assert_eq!(
            l.m4(personality("splash").unwrap()).unwrap(),
            "/opt/svm/share/svm/c.m4.svm"
        );
        assert!(l
            .libs(personality("svm").unwrap())
            .contains(&"-lsvm".to_string()));
    }

    fn words(args: &[&str]) -> Vec<String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match run(&args, &layout()) {
            Ok(Request::Words(w)) => w,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn error(args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match run(&args, &layout()) {
            Err(e) => e,
            other => panic!("{args:?} should fail: {other:?}"),
        }
    }

    #[test]
    fn splash_libs_wrap_main_and_link_the_stub() {
        assert_eq!(
            words(&["--libs", "splash"]),
            [
                "/src/svm/svm-api-splash/stub/svm_splash_stub.c",
                "-L/build/target/debug",
                "-Wl,-rpath,/build/target/debug",
                "-lsvm_splash",
                "-Wl,--wrap=main",
                "-Wl,-z,now",
                "-pthread",
            ]
        );
    }

    #[test]
    fn cvm_libs_wrap_main_and_link_its_stub() {
        assert_eq!(
            words(&["--libs", "cvm"]),
            [
                "/src/svm/svm-api-cvm/stub/svm_cvm_stub.c",
                "-L/build/target/debug",
                "-Wl,-rpath,/build/target/debug",
                "-lsvm_cvm",
                "-Wl,--wrap=main",
                "-Wl,-z,now",
                "-pthread",
            ]
        );
    }

    #[test]
    fn other_personalities_link_only_their_library() {
        for (name, lib) in [("smi", "svm_smi"), ("deck", "svm_deck"), ("svm", "svm")] {
            assert_eq!(
                words(&["--libs", name]),
                [
                    "-L/build/target/debug".to_string(),
                    "-Wl,-rpath,/build/target/debug".to_string(),
                    format!("-l{lib}"),
                    "-pthread".to_string(),
                ]
            );
        }
        assert_eq!(words(&["--libs=deck"]), words(&["--libs", "deck"]));
    }

    #[test]
    fn m4_is_splash_only() {
        assert_eq!(
            words(&["--m4", "splash"]),
            ["/src/svm/svm-api-splash/macros/c.m4.svm"]
        );
        assert!(error(&["--m4", "smi"]).contains("no m4 macro file"));
    }

    #[test]
    fn options_combine_in_order() {
        assert_eq!(
            words(&["--libdir", "--m4", "splash"]),
            [
                "/build/target/debug",
                "/src/svm/svm-api-splash/macros/c.m4.svm"
            ]
        );
    }

    #[test]
    fn bad_command_lines_are_errors() {
        assert!(error(&["--libs", "pvm"]).contains("unknown personality `pvm`"));
        assert!(error(&["--libs"]).contains("needs a personality"));
        assert!(error(&["--m4"]).contains("needs a personality"));
        assert!(error(&["--frobnicate"]).contains("unknown option"));
        assert!(error(&[]).contains("no option"));
    }

    #[test]
    fn help_wins() {
        let args = vec!["--cflags".to_string(), "--help".to_string()];
        assert_eq!(run(&args, &layout()), Ok(Request::Help));
    }

    #[test]
    fn cflags_lists_only_existing_include_dirs() {
        // The real source tree: the splash include directory exists, a made-up root has none.
        let real = Layout::current().expect("layout");
        let flags = real.cflags();
        let splash = format!("-I{}", real.root.join("svm-api-splash/include").display());
        assert!(flags.contains(&splash), "{flags:?}");
        for f in &flags {
            let dir = f.strip_prefix("-I").expect("-I flag");
            assert!(
                Path::new(dir).is_absolute() && Path::new(dir).is_dir(),
                "{f}"
            );
        }
        assert!(layout().cflags().is_empty());
    }

    #[test]
    fn the_source_files_exist() {
        let real = Layout::current().expect("layout");
        for p in PERSONALITIES {
            assert!(real.root.join(p.include).is_dir(), "{} missing", p.include);
            for file in [p.wrap_main_stub, p.m4].into_iter().flatten() {
                assert!(real.root.join(file).is_file(), "{file} missing");
            }
        }
    }
}
