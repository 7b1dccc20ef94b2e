/* X25519 (RFC 7748): the Diffie-Hellman function on Curve25519, for the
 * exchange's first message pair (see exchange.c). A field element is 16
 * limbs of 16 bits held in int64_t, reduced lazily (2^256 = 38 mod p);
 * the ladder swaps in constant time, with no branch or index on a secret
 * bit. Tested against RFC 7748's vectors (unit_test.c). */
#include <string.h>
#include "x25519.h"

typedef int64_t fe[16];

/* carry: every limb back into 16 bits, the top carry folded in times 38 */
static void carry(fe o)
{
	int64_t c;
	int i;

	for (i = 0; i < 16; i++) {
		o[i] += 1 << 16;
		c = o[i] >> 16; /* the carry plus one: o[i] + 2^16 >= 0 */
		if (i < 15)
			o[i + 1] += c - 1;
		else
			o[0] += 38 * (c - 1);
		o[i] -= c * 65536;
	}
}

/* cswap swaps p and q when b is 1, p and q unchanged when b is 0 */
static void cswap(fe p, fe q, int64_t b)
{
	int64_t mask = -b, t;
	int i;

	for (i = 0; i < 16; i++) {
		t = mask & (p[i] ^ q[i]);
		p[i] ^= t;
		q[i] ^= t;
	}
}

static void add(fe o, const fe a, const fe b)
{
	int i;

	for (i = 0; i < 16; i++)
		o[i] = a[i] + b[i];
}

static void sub(fe o, const fe a, const fe b)
{
	int i;

	for (i = 0; i < 16; i++)
		o[i] = a[i] - b[i];
}

static void mul(fe o, const fe a, const fe b)
{
	int64_t t[31];
	int i, j;

	memset(t, 0, sizeof(t));
	for (i = 0; i < 16; i++)
		for (j = 0; j < 16; j++)
			t[i + j] += a[i] * b[j];
	for (i = 0; i < 15; i++)
		t[i] += 38 * t[i + 16];
	memcpy(o, t, sizeof(fe));
	carry(o);
	carry(o);
}

/* invert: a^(p-2), p - 2 = 2^255 - 21 */
static void invert(fe o, const fe a)
{
	fe c;
	int i;

	memcpy(c, a, sizeof(fe));
	for (i = 253; i >= 0; i--) {
		mul(c, c, c);
		if (i != 2 && i != 4)
			mul(c, c, a);
	}
	memcpy(o, c, sizeof(fe));
}

static void unpack(fe o, const uint8_t in[32])
{
	int i;

	for (i = 0; i < 16; i++)
		o[i] = in[2 * i] + ((int64_t)in[2 * i + 1] << 8);
	o[15] &= 0x7fff; /* the top bit of u is ignored */
}

/* pack: the canonical value, below p */
static void pack(uint8_t out[32], const fe n)
{
	fe m, t;
	int i, j;
	int64_t b;

	memcpy(t, n, sizeof(fe));
	carry(t);
	carry(t);
	carry(t);
	for (j = 0; j < 2; j++) {
		m[0] = t[0] - 0xffed;
		for (i = 1; i < 15; i++) {
			m[i] = t[i] - 0xffff - ((m[i - 1] >> 16) & 1);
			m[i - 1] &= 0xffff;
		}
		m[15] = t[15] - 0x7fff - ((m[14] >> 16) & 1);
		b = (m[15] >> 16) & 1; /* 1: t < p, keep t */
		m[14] &= 0xffff;
		cswap(t, m, 1 - b);
	}
	for (i = 0; i < 16; i++) {
		out[2 * i] = (uint8_t)(t[i] & 0xff);
		out[2 * i + 1] = (uint8_t)((t[i] >> 8) & 0xff);
	}
}

void swift_x25519(uint8_t out[32], const uint8_t scalar[32], const uint8_t point[32])
{
	static const fe a24 = {0xdb41, 1}; /* (486662 - 2) / 4 = 121665 */
	uint8_t k[32];
	fe x1, x2, z2, x3, z3, a, b, c, d, e;
	int64_t bit;
	int i;

	memcpy(k, scalar, 32);
	k[0] &= 248;
	k[31] = (uint8_t)((k[31] & 127) | 64);
	unpack(x1, point);
	memset(x2, 0, sizeof(fe));
	memset(z2, 0, sizeof(fe));
	memset(z3, 0, sizeof(fe));
	memcpy(x3, x1, sizeof(fe));
	x2[0] = z3[0] = 1;
	/* the Montgomery ladder (RFC 7748, section 5), swapping by bit */
	for (i = 254; i >= 0; i--) {
		bit = (k[i >> 3] >> (i & 7)) & 1;
		cswap(x2, x3, bit);
		cswap(z2, z3, bit);
		add(a, x2, z2); /* A = x2 + z2 */
		sub(b, x2, z2); /* B = x2 - z2 */
		add(c, x3, z3); /* C = x3 + z3 */
		sub(d, x3, z3); /* D = x3 - z3 */
		mul(d, d, a);   /* DA */
		mul(c, c, b);   /* CB */
		mul(a, a, a);   /* AA */
		mul(b, b, b);   /* BB */
		add(x3, d, c);
		mul(x3, x3, x3); /* x3 = (DA + CB)^2 */
		sub(z3, d, c);
		mul(z3, z3, z3);
		mul(z3, z3, x1); /* z3 = x1 (DA - CB)^2 */
		sub(e, a, b);    /* E = AA - BB */
		mul(x2, a, b);   /* x2 = AA BB */
		mul(z2, e, a24);
		add(z2, z2, a);
		mul(z2, z2, e); /* z2 = E (AA + a24 E) */
		cswap(x2, x3, bit);
		cswap(z2, z3, bit);
	}
	invert(z2, z2);
	mul(x2, x2, z2);
	pack(out, x2);
	explicit_bzero(k, sizeof(k));
	explicit_bzero(x2, sizeof(fe));
	explicit_bzero(z2, sizeof(fe));
	explicit_bzero(x3, sizeof(fe));
	explicit_bzero(z3, sizeof(fe));
}

void swift_x25519_base(uint8_t out[32], const uint8_t scalar[32])
{
	static const uint8_t nine[32] = {9};

	swift_x25519(out, scalar, nine);
}

int swift_x25519_zero(const uint8_t v[32])
{
	uint8_t acc = 0;
	int i;

	for (i = 0; i < 32; i++)
		acc |= v[i];
	return acc == 0;
}
