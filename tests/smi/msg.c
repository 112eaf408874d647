/* Messages (Send/Recv/Isend/Send_wait/Sendrecv), signals (wait and callback), timers. */
#include <string.h>
#include "check.h"

static volatile int fired = 0;
static void on_signal(void *arg) { fired = *(int *)arg; }

int main(int argc, char **argv) {
    int rank, size, next, prev, peer, i, sec, usec, arg = 17;
    char out[120], in[120];
    smi_signal_handle h;
    OK(SMI_Init(&argc, &argv));
    OK(SMI_Proc_rank(&rank));
    OK(SMI_Proc_size(&size));
    next = (rank + 1) % size;
    prev = (rank + size - 1) % size;
    OK(SMI_Get_timer(&sec, &usec));
    CHECK(sec > 0, "timer");
    for (i = 0; i < 10; i++) {
        snprintf(out, sizeof out, "message %d from %d", i, rank);
        OK(SMI_Send(out, (int)strlen(out) + 1, next));
        OK(SMI_Recv(in, sizeof in, prev));
        snprintf(out, sizeof out, "message %d from %d", i, prev);
        CHECK(strcmp(in, out) == 0, "got '%s'", in);
    }
    OK(SMI_Isend(out, 8, next));
    CHECK(SMI_Send(out, 8, next) == SMI_ERR_PENDING, "a send while an Isend is pending");
    OK(SMI_Send_wait(next));
    CHECK(SMI_Send_wait(next) == SMI_ERR_NOTPOSTED, "second Send_wait");
    OK(SMI_Recv(in, 8, prev));
    memset(out, rank, sizeof out);
    peer = (rank ^ 1) < size ? (rank ^ 1) : rank;
    OK(SMI_Sendrecv(out, in, sizeof out, peer));
    CHECK(in[119] == (char)peer, "sendrecv");
    /* Signals: a callback thread on each process, then a plain wait. */
    OK(SMI_Signal_setCallBack(prev, on_signal, &arg, &h));
    SMI_Barrier();
    OK(SMI_Signal_send(next));
    OK(SMI_Signal_joinCallBack(&h));
    CHECK(fired == 17 && h == NULL, "callback %d", fired);
    OK(SMI_Signal_send(next));
    OK(SMI_Signal_wait(SMI_SIGNAL_ANY));
    SMI_Barrier();
    if (rank == 0) OK(SMI_Signal_send(SMI_SIGNAL_BCAST));
    if (rank != 0) OK(SMI_Signal_wait(0));
    OK(SMI_Get_timespan(&sec, &usec));
    CHECK(sec >= 0 && usec >= 0, "timespan");
    {
        double t0 = SMI_Wtime();
        unsigned long long t;
        SMI_Get_ticks(&t);
        CHECK(SMI_Wtime() >= t0 && t > 0 && SMI_Wticks() > 0, "clocks");
    }
    OK(SMI_Watchdog(30));
    OK(SMI_Debug(0));
    SMI_Barrier();
    OK(SMI_Watchdog(SMI_WATCHDOG_OFF));
    OK(SMI_Finalize());
    if (rank == 0) printf("PASS msg\n");
    return 0;
}
