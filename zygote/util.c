/* Small helpers: the clock, a path's directory, escaping peer-supplied
 * text for logs, choosing the GID that carries this network namespace's
 * address, a sorted lookup and the size of a pool exchange. */
#include <string.h>
#include <time.h>
#include "util.h"

uint64_t swift_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

const char *swift_dir_of(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (!slash)
		path = ".", n = 1;
	else if (n == 0)
		n = 1; /* "/" */
	if (n >= len)
		n = len - 1;
	memcpy(buf, path, n);
	buf[n] = 0;
	return buf;
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

int swift_pick_gid(const struct swift_gid_ent *t, int n, const uint32_t *addrs, int naddr)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	int i, j, pass, mapped = 0;

	/* RoCE v2 first (routable), then v1 */
	for (pass = 0; pass < 2; pass++)
		for (i = 0; i < n; i++) {
			uint32_t a;

			if (!t[i].valid || memcmp(t[i].raw, v4mapped, 12))
				continue;
			mapped = 1;
			if (t[i].v2 != !pass)
				continue;
			memcpy(&a, t[i].raw + 12, 4);
			for (j = 0; j < naddr; j++)
				if (a == addrs[j])
					return i;
		}
	if (mapped)
		return -2;
	for (i = 0; i < n; i++)
		if (t[i].valid)
			return i;
	return -1;
}

int swift_in_sorted(const uintptr_t *a, int n, uintptr_t v)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (a[mid] == v)
			return 1;
		if (a[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

int swift_xnext(int asked, int late, int max)
{
	if (asked < 1 || asked > max)
		asked = max;
	if (late)
		return asked > 1 ? asked / 2 : 1;
	return asked > max / 2 ? max : asked * 2;
}
