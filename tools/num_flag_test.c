/* num_flag_parse: the whole string, digits only, in range, no wrap. */
#include "tools/num_flag.h"

#include <stdio.h>

static int failures;

static void expect(const char *v, uint64_t min, uint64_t max, bool ok, uint64_t want)
{
    uint64_t got = 12345;
    bool r = num_flag_parse(v, min, max, &got);
    if (r != ok || (ok && got != want) || (!ok && got != 12345)) {
        fprintf(stderr, "FAIL: '%s' in [%llu, %llu]: returned %d value %llu\n", v ? v : "(null)",
                (unsigned long long)min, (unsigned long long)max, r, (unsigned long long)got);
        failures++;
    }
}

int main(void)
{
    expect("0", 0, 10, true, 0);
    expect("10", 0, 10, true, 10);
    expect("007", 0, 10, true, 7);
    expect("18446744073709551615", 0, UINT64_MAX, true, UINT64_MAX);
    expect("18446744073709551616", 0, UINT64_MAX, false, 0); /* wraps in 64 bits */
    expect("99999999999999999999999", 0, UINT64_MAX, false, 0);
    expect("4294967297", 1, UINT32_MAX, false, 0); /* a uint32 cast wraps it to 1 */
    expect("99999999999", 1, 2147483647, false, 0); /* an int cast wraps it to 1215752191 */
    expect("11", 0, 10, false, 0);
    expect("0", 1, 10, false, 0);
    expect("", 0, 10, false, 0);
    expect(NULL, 0, 10, false, 0);
    expect("-1", 0, UINT64_MAX, false, 0); /* strtoul would give UINT64_MAX */
    expect("+1", 0, 10, false, 0);
    expect(" 1", 0, 10, false, 0);
    expect("1 ", 0, 10, false, 0);
    expect("0x10", 0, 100, false, 0);
    expect("1e3", 0, 10000, false, 0);
    expect("1.0", 0, 10, false, 0);
    expect("12k", 0, 100000, false, 0);
    if (failures == 0)
        printf("num_flag_test: all passed\n");
    return failures ? 1 : 0;
}
