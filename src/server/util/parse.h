/*
** Values of the command line (parse.c).
*/
#ifndef MP_PARSE_H
#define MP_PARSE_H

/* a size in bytes with an optional k, m or g suffix (powers of 1024), or
** -1 (also for one past what a long long holds) */
long long mp_parse_size(const char *v);

#endif
