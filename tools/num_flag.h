/* Strict parsing of the tools' numeric flags: the whole string is one
 * decimal integer of digits only (no sign, blank, base prefix or suffix),
 * within [min, max], without wrapping. One parser, so no flag of any tool
 * wraps 4294967297 into 1 or -1 into a huge count. */
#ifndef ENGRAM_TOOLS_NUM_FLAG_H
#define ENGRAM_TOOLS_NUM_FLAG_H

#include <stdbool.h>
#include <stdint.h>

/* Parses v into *out when it is a decimal integer in [min, max]; *out is
 * untouched otherwise. */
bool num_flag_parse(const char *v, uint64_t min, uint64_t max, uint64_t *out);

/* num_flag_parse, or prints "<prog>: <opt> needs an integer in [min, max],
 * got '<v>'" to stderr and exits 2 (the tools' usage-error code). */
uint64_t num_flag(const char *prog, const char *opt, const char *v, uint64_t min, uint64_t max);

#endif
