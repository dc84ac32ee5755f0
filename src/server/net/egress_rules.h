/*
** The egress policy's parts (egress_rules.c), pure functions with no I/O:
** rule lists of CIDRs and domain names (`*.` wildcards), the ranges that no
** sandbox may reach unless the operator opens them, and the readers of a
** destination's name in the first bytes of a connection (the TLS
** ClientHello's SNI, an HTTP request's Host) and in DNS messages.
*/
#ifndef MP_EGRESS_RULES_H
#define MP_EGRESS_RULES_H

#include <stddef.h>
#include <stdint.h>

#define MP_EGRESS_NAME_MAX 253

typedef struct mp_egress_cidr {
  uint32_t addr, mask; /* host order */
} mp_egress_cidr;

typedef struct mp_egress_rules {
  mp_egress_cidr *cidrs;
  size_t ncidrs;
  char **names; /* lower case, no trailing dot; "*.x" matches below x */
  size_t nnames;
} mp_egress_rules;

/* Adds the comma- or space-separated rules of list (CIDRs a.b.c.d/n, single
** addresses, names, *.names). 0, or -1 with err naming the bad rule. */
int mp_egress_rules_add(mp_egress_rules *r, const char *list, char *err, size_t errlen);
void mp_egress_rules_free(mp_egress_rules *r);
int mp_egress_rules_empty(const mp_egress_rules *r);
/* 1 when addr (host order) is in one of r's CIDRs */
int mp_egress_rules_has_addr(const mp_egress_rules *r, uint32_t addr);
/* 1 when name (any case, a trailing dot allowed) matches one of r's names */
int mp_egress_rules_has_name(const mp_egress_rules *r, const char *name);
/* the rules as a JSON-ready list "a, b, c" into out */
void mp_egress_rules_text(const mp_egress_rules *r, char *out, size_t outlen);

/* The ranges refused whatever the policy allows (docs/platform.md,
** "Networks"): "private", "loopback", ... for addr (host order), or NULL */
const char *mp_egress_reserved(uint32_t addr);

/* The server name of a TLS ClientHello in buf[0..len): 1 and name, 0 when
** it has none, -1 while more bytes are needed (a record not complete yet),
** -2 when it is not a ClientHello. */
int mp_egress_sni(const unsigned char *buf, size_t len, char name[MP_EGRESS_NAME_MAX + 1]);
/* The Host of an HTTP/1 request head in buf[0..len) (without its port): 1,
** 0 (a head without Host, or not HTTP), -1 (the head is not complete). */
int mp_egress_http_host(const unsigned char *buf, size_t len,
                        char name[MP_EGRESS_NAME_MAX + 1]);

/* DNS: the first question's name of a query or answer (1, or 0 when the
** message cannot be read), its id and its type */
int mp_egress_dns_question(const unsigned char *msg, size_t len,
                           char name[MP_EGRESS_NAME_MAX + 1], unsigned *qtype);
/* calls each(addr, ud) for every A record of an answer (addr: network
** order) */
void mp_egress_dns_answers(const unsigned char *msg, size_t len,
                           void (*each)(uint32_t addr, void *ud), void *ud);
/* turns query msg (len bytes, at most cap) into an answer with rcode
** (5: REFUSED, 2: SERVFAIL) and no records; its new length, or 0 */
size_t mp_egress_dns_refuse(unsigned char *msg, size_t len, unsigned rcode);

#endif
