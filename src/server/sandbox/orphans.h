/*
** Orphans of mastra-platform (orphans.c): the run files of running
** commands, DATA_DIR/state/run/<boot id>/<pid>-<start time>, and the scan
** of /proc for the processes marked with MP_MARKER_VAR. It knows nothing
** of sandboxes: its callers (sandbox.c) pass the sandbox id to write down
** and callbacks that say which marked processes to kill and what to do
** with the ids of the interrupted ones.
*/
#ifndef MP_ORPHANS_H
#define MP_ORPHANS_H

#include <stddef.h>
#include <sys/types.h>

/* What /proc/PID/stat says of pid: state, process group, start time (in
** clock ticks since boot). -1 when there is no such process. */
int mp_orphans_proc_stat(long pid, char *state, long *pgrp,
                         unsigned long long *start);

/* Write the run file of the command pid just started in the sandbox id
** (it holds the id); returns the leader's start time (0 if /proc could
** not tell: then there is no run file). Not fsync'd: it only has to
** outlive the server, not the machine. */
unsigned long long mp_orphans_run_file_add(const char *data_dir,
                                           const char *id, pid_t pid);
/* remove the run file of pid started at start (0: none was written) */
void mp_orphans_run_file_remove(const char *data_dir, pid_t pid,
                                unsigned long long start);

/* Scan /proc: SIGKILL every live process (not a zombie, not pid 1, not
** this one) whose MP_MARKER_VAR names a sandbox, if wanted(data, id, pgrp)
** says so; killed (or NULL) is told of each. Returns how many were
** killed. */
size_t mp_orphans_kill_marked(int (*wanted)(void *data, const char *id,
                                            long pgrp),
                              void (*killed)(void *data, const char *id,
                                             long pid),
                              void *data);

/* At startup: remove the run files of earlier boots, then SIGKILL the
** group of each run file of this boot whose leader is gone or is still
** the process that was started (a reused pid is left alone), telling
** interrupted(data, id) of the sandbox it names; every run file is
** removed. Returns how many groups were killed. */
size_t mp_orphans_kill_run_files(const char *data_dir,
                                 void (*interrupted)(void *data,
                                                     const char *id),
                                 void *data);

#endif
