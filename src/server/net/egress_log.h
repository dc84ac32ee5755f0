/*
** A sandbox's egress log (egress_log.c): each outbound connection, UDP
** flow and DNS query with its time, destination (address, port, and the
** name where known), bytes out and in, and whether it was allowed (and why
** not). Bounded: the newest MP_EGRESS_LOG_MEM in memory; on disk, JSON
** lines appended to the sandbox's file, which is moved to "<file>.1" at
** MP_EGRESS_LOG_FILE_MAX bytes (so at most twice that). The files live in
** the sandbox's directory and go when it is destroyed.
*/
#ifndef MP_EGRESS_LOG_H
#define MP_EGRESS_LOG_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "net/egress_rules.h"

#define MP_EGRESS_LOG_MEM 256
#define MP_EGRESS_LOG_FILE_MAX (512 * 1024)

typedef struct mp_egress_entry {
  int64_t start_ms, end_ms; /* wall clock (ms since the epoch); end 0: open */
  uint32_t addr;            /* host order */
  uint16_t port;
  char proto[4]; /* "tcp", "udp", "dns" */
  char name[MP_EGRESS_NAME_MAX + 1];
  uint64_t bytes_out, bytes_in;
  int allowed;
  char why[96]; /* a refusal's reason, or an allowed one's failure */
} mp_egress_entry;

typedef struct mp_egress_log {
  mp_egress_entry *ring; /* grows to MP_EGRESS_LOG_MEM, then a ring */
  size_t cap, n, head;   /* its slots, entries held, the oldest's slot */
  uint64_t total, allowed, refused, bytes_out, bytes_in, dns;
  char *path;
  long long size; /* of the file */
} mp_egress_log;

/* the file (NULL: memory only); what it holds already is read back */
void mp_egress_log_open(mp_egress_log *log, const char *path);
void mp_egress_log_add(mp_egress_log *log, const mp_egress_entry *e);
/* counts into o, and with entries > 0 the newest `entries` as "entries" */
void mp_egress_log_json(const mp_egress_log *log, cJSON *o, int entries);
void mp_egress_log_free(mp_egress_log *log);
int64_t mp_egress_wall_ms(void);

#endif
