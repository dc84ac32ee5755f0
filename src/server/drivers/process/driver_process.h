/*
** The `process` driver of mastra-platform (driver_process.c): a sandbox is
** a directory on the host and its commands are process groups.
*/
#ifndef MP_DRIVER_PROCESS_H
#define MP_DRIVER_PROCESS_H

#include "sandbox/sandbox.h"

extern const mp_driver mp_process_driver;

#endif
