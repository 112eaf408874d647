/* Linked into CVM programs by `svm-config --libs cvm` (with -Wl,--wrap=main): hands main and
 * the bounds of the program's writable data to the svm CVM runtime. */
extern char __data_start[], _end[];
int __real_main(int argc, char **argv);
int svm_cvm_main(int argc, char **argv, int (*real_main)(int, char **), void *data_start, void *data_end);

int __wrap_main(int argc, char **argv)
{
    return svm_cvm_main(argc, argv, __real_main, __data_start, _end);
}
