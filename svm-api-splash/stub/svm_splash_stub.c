/*
 * svm_splash_stub.c -- linked into every SPLASH program built for svm (svm-config --libs splash
 * puts this file on the compiler's command line together with -Wl,--wrap=main).
 *
 * With --wrap=main the C start-up code calls __wrap_main instead of the program's main, which
 * the linker renames __real_main. The runtime then joins the job, makes the executable's
 * writable data segment [__data_start, _end) a shared region, and runs the program's main on the
 * master only; every other node runs the worker loop. This must live in the executable: a
 * wrapper inside the shared library would not see the program's main nor its data segment.
 *
 * Self-contained on purpose (no include path needed); the prototype matches splash_svm.h.
 */

extern char __data_start[], _end[];

int __real_main(int argc, char **argv);
int __wrap_main(int argc, char **argv);
int svm_splash_main(int argc, char **argv, int (*real_main)(int, char **), void *data_start,
                    void *data_end);

int __wrap_main(int argc, char **argv)
{
    return svm_splash_main(argc, argv, __real_main, __data_start, _end);
}
