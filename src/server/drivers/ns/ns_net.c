/*
** The networks of a `namespaces` sandbox (ns_net.h).
*/
#define _GNU_SOURCE
#include "drivers/ns/ns_net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>

#include "drivers/ns/ns_host.h"
#include "drivers/ns/init/ns_init.h" /* MP_NS_ARG_NONE */
#include "net/egress.h"
#include "net/egress_log.h"
#include "net/egress_rules.h"
#include "util/log.h"

const char *mp_ns_net_resolv(void) {
  const char *p = mp_ns_host.egress && mp_ns_host.net ? mp_net_resolv_path(mp_ns_host.net) : NULL;
  return p ? p : MP_NS_ARG_NONE;
}

int mp_ns_net_joins(const char *network) {
  return strcmp(network, "PRIVATE") == 0 || mp_ns_host.egress != NULL;
}

static void egress_log_path(const mp_sandbox *sb, char *out, size_t n) {
  snprintf(out, n, "%s/egress.log", sb->root);
}

void mp_ns_net_name(mp_sandbox *sb, ns_box *b) {
  char path[4200];
  if (b->egress == NULL || sb == NULL) return;
  egress_log_path(sb, path, sizeof path);
  mp_egress_box_name(b->egress, sb->id, path);
  if (sb->egress_rules) {
    char err[300];
    if (mp_egress_box_narrow(b->egress, sb->egress_allow_given ? sb->egress_allow : NULL,
                             sb->egress_deny[0] ? sb->egress_deny : NULL, err, sizeof err) < 0)
      mp_log("sandbox %s: its egress rules: %s", sb->id, err);
  }
}

int mp_ns_net_narrow(mp_sandbox *sb, const char *allow, const char *deny, char *err,
                     size_t errlen) {
  ns_box *b = sb->driver_data;
  mp_egress_rules check;
  int bad;
  memset(&check, 0, sizeof check);
  bad = (allow != NULL && mp_egress_rules_add(&check, allow, err, errlen) < 0)
        || (deny != NULL && mp_egress_rules_add(&check, deny, err, errlen) < 0);
  mp_egress_rules_free(&check);
  if (bad) return -1;
  if (strlen(allow ? allow : "") >= sizeof sb->egress_allow
      || strlen(deny ? deny : "") >= sizeof sb->egress_deny) {
    snprintf(err, errlen, "the rules are longer than %zu bytes a list",
             sizeof sb->egress_allow - 1);
    return -1;
  }
  snprintf(sb->egress_allow, sizeof sb->egress_allow, "%s", allow ? allow : "");
  snprintf(sb->egress_deny, sizeof sb->egress_deny, "%s", deny ? deny : "");
  sb->egress_allow_given = allow != NULL;
  sb->egress_rules = 1;
  /* a live box named already: now (a box named later takes them then) */
  if (b != NULL && b->egress != NULL && mp_ns_host.egress != NULL
      && mp_egress_box_narrow(b->egress, allow, deny, err, errlen) < 0)
    return -1;
  return 0;
}

int mp_ns_net_join(mp_sandbox *sb, ns_box *b, int netns_fd, int peer_nl, char *err,
                   size_t errlen) {
  uint32_t addr = 0;
  if (mp_ns_host.net == NULL) {
    snprintf(err, errlen, "%s networks are not available: %s",
             sb && strcmp(sb->network, "PRIVATE") == 0 ? "PRIVATE" : "egress",
             mp_ns_host.net_err);
    return -1;
  }
  if (sb != NULL && strcmp(sb->network, "PRIVATE") == 0) {
    char dotted[32];
    struct in_addr a;
    if (mp_net_join_nl(mp_ns_host.net, sb->environment, sb->id, netns_fd, peer_nl, dotted,
                       sizeof dotted, err, errlen) < 0)
      return -1;
    b->joined = 1;
    if (mp_ns_host.egress == NULL || inet_pton(AF_INET, dotted, &a) != 1) return 0;
    addr = ntohl(a.s_addr);
  } else {
    if (mp_ns_host.egress == NULL) {
      snprintf(err, errlen, "egress is off");
      return -1;
    }
    if (mp_net_out_join(mp_ns_host.net, netns_fd, peer_nl, &addr, err, errlen) < 0) return -1;
    b->out_addr = addr;
  }
  b->egress = mp_egress_box_add(mp_ns_host.egress, addr);
  if (b->egress == NULL) {
    snprintf(err, errlen, "out of memory");
    mp_ns_net_leave(sb, b);
    return -1;
  }
  mp_ns_net_name(sb, b);
  return 0;
}

void mp_ns_net_leave(mp_sandbox *sb, ns_box *b) {
  if (b->egress != NULL && mp_ns_host.egress != NULL) mp_egress_box_remove(b->egress);
  b->egress = NULL;
  if (b->out_addr != 0 && mp_ns_host.net != NULL) mp_net_out_leave(mp_ns_host.net, b->out_addr);
  b->out_addr = 0;
  if (b->joined && sb != NULL && mp_ns_host.net != NULL)
    mp_net_leave(mp_ns_host.net, sb->environment, sb->id);
  b->joined = 0;
}

int mp_ns_net_json(mp_sandbox *sb, cJSON *o, int entries) {
  ns_box *b = sb->driver_data;
  char path[4200];
  mp_egress_log log;
  if (b != NULL && b->egress != NULL && mp_ns_host.egress != NULL) {
    mp_egress_box_json(b->egress, o, entries);
    return 0;
  }
  /* no live box (a sandbox whose init is not running, or a server that
  ** restarted): its log from disk */
  if (mp_ns_host.egress == NULL && mp_ns_host.egress_err[0]) {
    cJSON_AddStringToObject(o, "off", mp_ns_host.egress_err);
  }
  memset(&log, 0, sizeof log);
  egress_log_path(sb, path, sizeof path);
  mp_egress_log_open(&log, path);
  mp_egress_log_json(&log, o, entries);
  cJSON_AddNumberToObject(o, "open", 0);
  mp_egress_log_free(&log);
  return 0;
}
