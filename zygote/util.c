/* Small helpers: the clock, and escaping peer-supplied text for logs. */
#include <string.h>
#include <time.h>
#include "zygote.h"

uint64_t swift_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

void swift_esc(const char *s, size_t max, char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0;

	if (!outlen)
		return;
	for (i = 0; i < max && s[i] && o + 5 < outlen; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= ' ' && c <= '~' && c != '\\') {
			out[o++] = (char)c;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = 0;
}
