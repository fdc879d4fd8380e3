/*
 * The test library's view of this process (tests/lib).
 */
#ifndef AIR__TL_PROC_H
#define AIR__TL_PROC_H

/* The resident set (KiB), from /proc/self/status. */
long tl_rss_kib(void);

#endif
