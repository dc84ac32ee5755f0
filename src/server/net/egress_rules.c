/*
** The egress policy's parts (egress_rules.h): rule lists, the refused
** ranges, and the readers of names in TLS, HTTP and DNS. No I/O: the proxy
** (egress.c) calls these on bytes it has read.
*/
#include "net/egress_rules.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* {====== rule lists ====== */

static int parse_cidr(const char *s, mp_egress_cidr *out) {
  char buf[64], *slash;
  struct in_addr a;
  long bits = 32;
  if (strlen(s) >= sizeof buf) return -1;
  strcpy(buf, s);
  slash = strchr(buf, '/');
  if (slash) {
    char *end;
    *slash = '\0';
    bits = strtol(slash + 1, &end, 10);
    if (slash[1] == '\0' || *end != '\0' || bits < 0 || bits > 32) return -1;
  }
  if (inet_pton(AF_INET, buf, &a) != 1) return -1;
  out->mask = bits == 0 ? 0 : 0xffffffffu << (32 - bits);
  out->addr = ntohl(a.s_addr) & out->mask;
  return 0;
}

static int valid_name(const char *s) {
  size_t i, n = strlen(s);
  if (n == 0 || n > MP_EGRESS_NAME_MAX) return 0;
  if (s[0] == '*') {
    if (s[1] != '.' || s[2] == '\0') return 0;
    s += 2;
    n -= 2;
  }
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!(isalnum(c) || c == '-' || c == '.' || c == '_')) return 0;
  }
  return s[0] != '.' && strstr(s, "..") == NULL;
}

static char *lower_name(const char *s) {
  size_t n = strlen(s), i;
  char *out;
  if (n > 0 && s[n - 1] == '.') n--;
  out = malloc(n + 1);
  if (out == NULL) return NULL;
  for (i = 0; i < n; i++) out[i] = (char)tolower((unsigned char)s[i]);
  out[n] = '\0';
  return out;
}

int mp_egress_rules_add(mp_egress_rules *r, const char *list, char *err, size_t errlen) {
  const char *p = list;
  while (*p) {
    char rule[300];
    size_t n = strcspn(p, ", \t\n");
    if (n == 0) {
      p++;
      continue;
    }
    if (n >= sizeof rule) {
      snprintf(err, errlen, "the rule '%.40s...' is too long", p);
      return -1;
    }
    memcpy(rule, p, n);
    rule[n] = '\0';
    p += n;
    if (isdigit((unsigned char)rule[0]) && strspn(rule, "0123456789./") == n) {
      mp_egress_cidr c, *grown;
      if (parse_cidr(rule, &c) < 0) {
        snprintf(err, errlen, "'%s' is not an IPv4 address or CIDR (a.b.c.d/n)", rule);
        return -1;
      }
      grown = realloc(r->cidrs, (r->ncidrs + 1) * sizeof *grown);
      if (grown == NULL) goto oom;
      r->cidrs = grown;
      r->cidrs[r->ncidrs++] = c;
    } else {
      char **grown, *name;
      if (!valid_name(rule)) {
        snprintf(err, errlen, "'%s' is not a domain name, a *.name, an IPv4 address"
                 " or a CIDR", rule);
        return -1;
      }
      name = lower_name(rule);
      grown = name ? realloc(r->names, (r->nnames + 1) * sizeof *grown) : NULL;
      if (grown == NULL) {
        free(name);
        goto oom;
      }
      r->names = grown;
      r->names[r->nnames++] = name;
    }
  }
  return 0;
oom:
  snprintf(err, errlen, "out of memory");
  return -1;
}

void mp_egress_rules_free(mp_egress_rules *r) {
  size_t i;
  for (i = 0; i < r->nnames; i++) free(r->names[i]);
  free(r->names);
  free(r->cidrs);
  memset(r, 0, sizeof *r);
}

int mp_egress_rules_empty(const mp_egress_rules *r) {
  return r->ncidrs == 0 && r->nnames == 0;
}

int mp_egress_rules_has_addr(const mp_egress_rules *r, uint32_t addr) {
  size_t i;
  for (i = 0; i < r->ncidrs; i++)
    if ((addr & r->cidrs[i].mask) == r->cidrs[i].addr) return 1;
  return 0;
}

int mp_egress_rules_has_name(const mp_egress_rules *r, const char *name) {
  char buf[MP_EGRESS_NAME_MAX + 2];
  size_t i, n = strlen(name);
  if (n == 0 || n > MP_EGRESS_NAME_MAX + 1) return 0;
  for (i = 0; i < n; i++) buf[i] = (char)tolower((unsigned char)name[i]);
  if (buf[n - 1] == '.') n--;
  buf[n] = '\0';
  for (i = 0; i < r->nnames; i++) {
    const char *rule = r->names[i];
    if (rule[0] == '*') { /* "*.x": a name that ends in ".x" */
      size_t k = strlen(rule + 1);
      if (n > k && strcmp(buf + n - k, rule + 1) == 0) return 1;
    } else if (strcmp(buf, rule) == 0) {
      return 1;
    }
  }
  return 0;
}

void mp_egress_rules_text(const mp_egress_rules *r, char *out, size_t outlen) {
  size_t i, at = 0;
  out[0] = '\0';
  for (i = 0; i < r->ncidrs && at < outlen; i++) {
    struct in_addr a;
    char s[INET_ADDRSTRLEN];
    int bits = 0;
    uint32_t m = r->cidrs[i].mask;
    while (m) bits++, m <<= 1;
    a.s_addr = htonl(r->cidrs[i].addr);
    inet_ntop(AF_INET, &a, s, sizeof s);
    at += (size_t)snprintf(out + at, outlen - at, "%s%s/%d", at ? ", " : "", s, bits);
  }
  for (i = 0; i < r->nnames && at < outlen; i++)
    at += (size_t)snprintf(out + at, outlen - at, "%s%s", at ? ", " : "", r->names[i]);
}

/* }====== */

/* {====== the refused ranges ====== */

const char *mp_egress_reserved(uint32_t a) {
  static const struct {
    uint32_t addr, mask;
    const char *what;
  } ranges[] = {
      {0x00000000u, 0xff000000u, "this network (0/8)"},
      {0x0a000000u, 0xff000000u, "private (10/8)"},
      {0x64400000u, 0xffc00000u, "shared address space (100.64/10)"},
      {0x7f000000u, 0xff000000u, "loopback (127/8)"},
      {0xa9fe0000u, 0xffff0000u, "link-local (169.254/16)"},
      {0xac100000u, 0xfff00000u, "private (172.16/12)"},
      {0xc0a80000u, 0xffff0000u, "private (192.168/16)"},
      {0xe0000000u, 0xf0000000u, "multicast (224/4)"},
      {0xf0000000u, 0xf0000000u, "reserved (240/4)"},
  };
  size_t i;
  for (i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
    if ((a & ranges[i].mask) == ranges[i].addr) return ranges[i].what;
  return NULL;
}

/* }====== */

/* {====== names in the first bytes ====== */

static unsigned be16(const unsigned char *p) { return (unsigned)p[0] << 8 | p[1]; }

static int copy_name(const unsigned char *s, size_t n, char name[MP_EGRESS_NAME_MAX + 1]) {
  size_t i;
  if (n == 0 || n > MP_EGRESS_NAME_MAX) return 0;
  for (i = 0; i < n; i++) {
    unsigned char c = s[i];
    if (!(isalnum(c) || c == '-' || c == '.' || c == '_')) return 0;
    name[i] = (char)tolower(c);
  }
  name[n] = '\0';
  return 1;
}

int mp_egress_sni(const unsigned char *b, size_t len, char name[MP_EGRESS_NAME_MAX + 1]) {
  size_t rec, at, end, n;
  if (len >= 1 && b[0] != 0x16) return -2;
  if (len < 5) return -1;
  rec = be16(b + 3);
  if (len < 5 + rec) return rec > 16384 + 2048 ? -2 : -1;
  end = 5 + rec;
  at = 5;
  if (at + 4 > end || b[at] != 1) return -2; /* ClientHello */
  at += 4 + 2 + 32;                         /* its length, version, random */
  if (at + 1 > end) return 0;
  at += 1 + b[at]; /* session id */
  if (at + 2 > end) return 0;
  at += 2 + be16(b + at); /* cipher suites */
  if (at + 1 > end) return 0;
  at += 1 + b[at]; /* compression methods */
  if (at + 2 > end) return 0;
  n = be16(b + at);
  at += 2;
  if (at + n < end) end = at + n;
  while (at + 4 <= end) {
    unsigned type = be16(b + at), elen = be16(b + at + 2);
    at += 4;
    if (at + elen > end) return 0;
    if (type == 0 && elen >= 5) { /* server_name: list, type 0, name */
      size_t nl = be16(b + at + 3);
      if (b[at + 2] != 0 || 5 + nl > elen) return 0;
      return copy_name(b + at + 5, nl, name);
    }
    at += elen;
  }
  return 0;
}

int mp_egress_http_host(const unsigned char *b, size_t len,
                        char name[MP_EGRESS_NAME_MAX + 1]) {
  size_t i = 0, head;
  const unsigned char *end = NULL;
  for (i = 0; i + 3 < len; i++)
    if (b[i] == '\r' && b[i + 1] == '\n' && b[i + 2] == '\r' && b[i + 3] == '\n') {
      end = b + i;
      break;
    }
  if (end == NULL) return len > 16384 ? 0 : -1;
  head = (size_t)(end - b);
  for (i = 0; i < head; i++) {
    if (b[i] == '\n' && i + 6 < head && strncasecmp((const char *)b + i + 1, "host:", 5) == 0) {
      size_t s = i + 6, e;
      while (s < head && (b[s] == ' ' || b[s] == '\t')) s++;
      for (e = s; e < head && b[e] != '\r' && b[e] != ':' && b[e] != ' '; e++) {}
      return copy_name(b + s, e - s, name);
    }
  }
  return 0;
}

/* }====== */

/* {====== DNS ====== */

/* skips a (possibly compressed) name at *at; 0 or -1 */
static int dns_skip(const unsigned char *m, size_t len, size_t *at) {
  size_t p = *at;
  while (p < len) {
    unsigned c = m[p];
    if (c == 0) {
      *at = p + 1;
      return 0;
    }
    if ((c & 0xc0) == 0xc0) {
      if (p + 2 > len) return -1;
      *at = p + 2;
      return 0;
    }
    p += 1 + c;
  }
  return -1;
}

int mp_egress_dns_question(const unsigned char *m, size_t len,
                           char name[MP_EGRESS_NAME_MAX + 1], unsigned *qtype) {
  size_t p = 12, out = 0;
  if (len < 12 || be16(m + 4) < 1) return 0;
  while (p < len && m[p] != 0) {
    unsigned c = m[p];
    size_t i;
    if (c > 63 || p + 1 + c > len || out + c + 1 > MP_EGRESS_NAME_MAX) return 0;
    for (i = 0; i < c; i++) {
      unsigned char ch = m[p + 1 + i];
      if (!(isalnum(ch) || ch == '-' || ch == '_')) return 0;
      name[out++] = (char)tolower(ch);
    }
    name[out++] = '.';
    p += 1 + c;
  }
  if (p + 5 > len) return 0;
  if (out > 0) out--; /* the last dot */
  name[out] = '\0';
  if (qtype) *qtype = be16(m + p + 1);
  return out > 0;
}

void mp_egress_dns_answers(const unsigned char *m, size_t len,
                           void (*each)(uint32_t addr, void *ud), void *ud) {
  size_t p = 12;
  unsigned qd, an, i;
  if (len < 12) return;
  qd = be16(m + 4);
  an = be16(m + 6);
  for (i = 0; i < qd; i++) {
    if (dns_skip(m, len, &p) < 0 || p + 4 > len) return;
    p += 4;
  }
  for (i = 0; i < an; i++) {
    unsigned type, rdlen;
    if (dns_skip(m, len, &p) < 0 || p + 10 > len) return;
    type = be16(m + p);
    rdlen = be16(m + p + 8);
    p += 10;
    if (p + rdlen > len) return;
    if (type == 1 && rdlen == 4) {
      uint32_t a;
      memcpy(&a, m + p, 4);
      each(a, ud);
    }
    p += rdlen;
  }
}

size_t mp_egress_dns_refuse(unsigned char *m, size_t len, unsigned rcode) {
  size_t p = 12;
  unsigned qd;
  if (len < 12) return 0;
  qd = be16(m + 4) >= 1;
  if (qd) {
    if (dns_skip(m, len, &p) < 0 || p + 4 > len) return 0;
    p += 4;
  }
  m[2] = (unsigned char)(0x80 | (m[2] & 0x79)); /* QR, the opcode and RD kept */
  m[3] = (unsigned char)(0x80 | (rcode & 0xf)); /* RA */
  m[4] = 0, m[5] = (unsigned char)qd;
  memset(m + 6, 0, 6); /* no answers, authorities, additionals */
  return p;
}

/* }====== */
