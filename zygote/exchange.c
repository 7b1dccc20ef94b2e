/* QP exchange between zygotes over TCP, authenticated end to end with the
 * tenant's key (HMAC-SHA-256), its QP parameters encrypted, version 6:
 *
 *   initiator -> server  HELLO   magic, tenant, from, to, key id, nonce_i, flags, count, pub_i
 *   server -> initiator  CHAL    nonce_s, pub_s, HMAC(k, "S" | H)
 *   initiator -> server  AUTH    HMAC(k, "I" | H), LINKPROOF, SEAL("Q", qpinfo[count]), TAG("Q")
 *   server -> initiator  REPLY   status, count, SEAL("R", qpinfo[count]), TAG("R")
 *   initiator -> server  CONFIRM TAG("C")
 *   server -> initiator  ACK     TAG("A")
 *
 * H is the SHA-256 of the hello's bytes, nonce_s and pub_s, so both proofs
 * cover every field of the hello: both names (a server answers only for
 * its own name; a client accepts only the server it dialed), the key id,
 * the flags, the count and the ephemeral keys. k is the tenant key the
 * hello names: a ring holds the newest key (dialed with) and the ones
 * still accepted during a rotation.
 *
 * S is the exchange's secret. In a first exchange it is X25519 of the two
 * sides' ephemeral keys (pub_i, fresh for the exchange; pub_s, the
 * server's, renewed every minute, so that a hello, which proves nothing
 * yet, costs the server no X25519: it computes S only once the initiator
 * proved the key; a point of small order, whose S is zero, is refused),
 * and the exchange makes its link's secret
 * L = HMAC(k, "L" | H | S). In a later one S is the pair's L, and pub_i
 * and pub_s are zeros. K = HMAC(k, "K" | H | S) is the session key;
 * TAG(x) is HMAC(K, x | the message), binding every later message to this
 * connection. SEAL(r, m) is m XOR the keystream of r under
 * E = HMAC(k, "E" | H | S): block j is HMAC(E, r | j as 4 bytes), counter
 * mode over a PRF. So a holder of the tenant key who saw every byte of a
 * link's exchange and of every later one learns neither L nor any QP
 * parameter: that takes an ephemeral key. The tags cover the
 * sealed bytes (encrypt-then-MAC), so a QP's number, PSN, GID, slice
 * address and rkey are neither readable nor changeable on the wire.
 *
 * Only a first exchange (INITIAL: the one that makes the pair's link)
 * stands on the tenant key alone. Every later one (a pool's next QPs, a
 * rebuild and the QPs it replaces, QPs on demand, a function's own)
 * proves that it comes from the zygote at the other end of the pair's
 * live link: LINKPROOF is HMAC(L, "P" | H), L the secret of the link's
 * own exchange, which only the two zygotes of that exchange hold. A key holder under another zygote's name
 * adds, replaces or drops nothing of that pair. (In a first exchange
 * LINKPROOF is zeros, and anything else is refused.) The initiator
 * checks the server's proof before it proves anything; a server that does
 * not know the key, or is not the one dialed, learns no proof and no QP.
 *
 * Rows are created once the proofs hold and the QPs' tag checks, and kept
 * only when the other side confirmed (the server at CONFIRM, the initiator
 * at ACK): a connection that breaks, or a byte changed in transit, leaves
 * nothing connected on either side.
 *
 * All integers are little endian; every message has a fixed size known from
 * what came before, and is parsed only once all of it has arrived. Both
 * ends are state machines fed by the event loop (swift_xconn_advance); a
 * slow or silent peer costs the loop nothing, and the loop bounds the whole
 * handshake with a deadline.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "exchange.h"
#include "sha256.h"
#include "util.h"
#include "x25519.h"

#define XMAGIC "SWIFTX06"
#define HELLO_LEN (8 + 3 * SWIFT_NAME_MAX + SWIFT_KEY_ID_MAX + 16 + 4 + 4 + 32)
#define CHAL_LEN (16 + 32 + 32) /* nonce_s, pub_s, the server's proof */
#define MAC_LEN 32
#define AUTH_HEAD (2 * MAC_LEN) /* the client's proof and the link proof */
#define QPINFO_LEN 44
#define REPLY_LEN 8
#define OFF_TENANT 8
#define OFF_FROM (OFF_TENANT + SWIFT_NAME_MAX)
#define OFF_TO (OFF_FROM + SWIFT_NAME_MAX)
#define OFF_KEYID (OFF_TO + SWIFT_NAME_MAX)
#define OFF_NONCE (OFF_KEYID + SWIFT_KEY_ID_MAX)
#define OFF_FLAGS (OFF_NONCE + 16)
#define OFF_COUNT (OFF_FLAGS + 4)
#define OFF_PUB (OFF_COUNT + 4)

_Static_assert(HELLO_LEN == OFF_PUB + 32, "hello layout");
_Static_assert(sizeof(((struct xconn *)0)->hello) == HELLO_LEN, "the kept hello");
_Static_assert(AUTH_HEAD + SWIFT_X_MAX * QPINFO_LEN + MAC_LEN <= SWIFT_XBUF, "the largest message fits");

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

static void put_qpinfo(uint8_t *p, const struct swift_qpinfo *q)
{
	uint64_t a = htole64(q->addr);
	uint16_t lid = htole16(q->lid);

	put32(p, q->qpn);
	put32(p + 4, q->psn);
	memcpy(p + 8, &lid, 2);
	memset(p + 10, 0, 2);
	memcpy(p + 12, q->gid, 16);
	memcpy(p + 28, &a, 8);
	put32(p + 36, q->rkey);
	put32(p + 40, q->replaces);
}

/* get_qpinfo: a peer's QP numbers and PSNs are 24-bit values. */
static int get_qpinfo(const uint8_t *p, struct swift_qpinfo *q)
{
	uint64_t a;
	uint16_t lid;

	memset(q, 0, sizeof(*q));
	q->qpn = get32(p);
	q->psn = get32(p + 4);
	memcpy(&lid, p + 8, 2);
	q->lid = le16toh(lid);
	memcpy(q->gid, p + 12, 16);
	memcpy(&a, p + 28, 8);
	q->addr = le64toh(a);
	q->rkey = get32(p + 36);
	q->replaces = get32(p + 40);
	if (!q->qpn || q->qpn > 0xffffff || q->psn > 0xffffff || q->replaces > 0xffffff)
		return -1;
	return 0;
}

/* A name field: NUL-terminated inside it (max bytes), not empty, printable. */
static int get_name(const uint8_t *p, size_t max, char *out)
{
	size_t n = strnlen((const char *)p, max), i;

	if (n == 0 || n == max)
		return -1;
	for (i = 0; i < n; i++)
		if (p[i] <= ' ' || p[i] > '~')
			return -1;
	memcpy(out, p, n + 1);
	return 0;
}

static void put_name(uint8_t *p, size_t max, const char *s)
{
	memcpy(p, s, strnlen(s, max - 1));
}

/* Keys ---------------------------------------------------------------------- */

static int hexval(int c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

int swift_keys_parse(const uint8_t *b, size_t n, struct swift_key *keys, int max, char *err, size_t errlen)
{
	size_t i = 0;
	int nk = 0, line = 0, text = 1;

	for (i = 0; i < n; i++)
		if (!(b[i] == '\n' || b[i] == '\t' || (b[i] >= ' ' && b[i] <= '~')))
			text = 0;
	if (!text) {
		/* a legacy node-local key: raw bytes */
		if (n < 16 || n > sizeof(keys[0].key)) {
			snprintf(err, errlen, "a raw key of %zu bytes (16 to %zu)", n, sizeof(keys[0].key));
			return -1;
		}
		memset(&keys[0], 0, sizeof(keys[0]));
		strcpy(keys[0].id, "local");
		memcpy(keys[0].key, b, n);
		keys[0].len = n;
		return 1;
	}
	for (i = 0; i < n;) {
		const uint8_t *l = b + i, *end = memchr(l, '\n', n - i);
		size_t len = end ? (size_t)(end - l) : n - i, p = 0, idlen, hexlen, k;

		i += len + (end ? 1 : 0);
		line++;
		while (p < len && (l[p] == ' ' || l[p] == '\t'))
			p++;
		if (p == len || l[p] == '#')
			continue;
		for (idlen = 0; p + idlen < len && l[p + idlen] != ' ' && l[p + idlen] != '\t'; idlen++)
			;
		if (nk == max) {
			snprintf(err, errlen, "line %d: more than %d keys", line, max);
			return -1;
		}
		if (idlen < 1 || idlen > SWIFT_KEY_ID_MAX - 1) {
			/* the hello's key id field holds it and its NUL */
			snprintf(err, errlen, "line %d: a key id of 1 to %d characters", line, SWIFT_KEY_ID_MAX - 1);
			return -1;
		}
		for (k = 0; k < idlen; k++)
			if (!(islower(l[p + k]) || isdigit(l[p + k]) || l[p + k] == '-')) {
				snprintf(err, errlen, "line %d: key id: a-z, 0-9 and '-' only", line);
				return -1;
			}
		memset(&keys[nk], 0, sizeof(keys[nk]));
		memcpy(keys[nk].id, l + p, idlen);
		p += idlen;
		while (p < len && (l[p] == ' ' || l[p] == '\t'))
			p++;
		for (hexlen = 0; p + hexlen < len && hexval(l[p + hexlen]) >= 0; hexlen++)
			;
		for (k = p + hexlen; k < len; k++)
			if (l[k] != ' ' && l[k] != '\t' && l[k] != '\r')
				break;
		if (hexlen != 64 || (k != len && k == p + hexlen)) {
			snprintf(err, errlen, "line %d: key %s: want 64 hex digits", line, keys[nk].id);
			return -1;
		}
		if (k != len) {
			/* the peer this key is for: a printable name */
			size_t pl = 0, q;

			while (k + pl < len && l[k + pl] > ' ' && l[k + pl] <= '~')
				pl++;
			for (q = k + pl; q < len && (l[q] == ' ' || l[q] == '\t' || l[q] == '\r'); q++)
				;
			if (pl >= sizeof(keys[nk].peer) || q != len) {
				snprintf(err, errlen,
					 "line %d: key %s: want \"<id> <64 hex digits> [peer]\" with a peer name of at "
					 "most %zu characters",
					 line, keys[nk].id, sizeof(keys[nk].peer) - 1);
				return -1;
			}
			memcpy(keys[nk].peer, l + k, pl);
		}
		for (k = 0; k < 32; k++)
			keys[nk].key[k] = (uint8_t)(hexval(l[p + 2 * k]) << 4 | hexval(l[p + 2 * k + 1]));
		keys[nk].len = 32;
		for (k = 0; k < (size_t)nk; k++)
			if (!strcmp(keys[k].id, keys[nk].id) && !strcmp(keys[k].peer, keys[nk].peer)) {
				snprintf(err, errlen, "line %d: key id %s given twice", line, keys[nk].id);
				return -1;
			}
		nk++;
	}
	if (!nk) {
		snprintf(err, errlen, "no key");
		return -1;
	}
	return nk;
}

int swift_keys_load(const struct swift_cfg *c, struct swift_key *keys, int max, char *err, size_t errlen)
{
	uint8_t b[4096];
	char why[200];
	struct stat st;
	size_t n = 0;
	ssize_t r = 1;
	int fd, nk;

	if (!c->key_file[0]) {
		if (max < 1)
			return -1;
		memset(&keys[0], 0, sizeof(keys[0]));
		strcpy(keys[0].id, "name");
		keys[0].len = strlen(c->tenant);
		memcpy(keys[0].key, c->tenant, keys[0].len);
		return 1;
	}
	fd = open(c->key_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		snprintf(err, errlen, "tenant key %s: %s", c->key_file, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < 1 || (size_t)st.st_size > sizeof(b)) {
		snprintf(err, errlen, "tenant key %s: not a regular file of 1 to %zu bytes", c->key_file, sizeof(b));
		close(fd);
		return -1;
	}
	while (n < sizeof(b) && r > 0) {
		r = read(fd, b + n, sizeof(b) - n);
		if (r > 0)
			n += (size_t)r;
		else if (r < 0 && errno == EINTR)
			r = 1;
	}
	close(fd);
	if (r < 0 || n != (size_t)st.st_size) {
		snprintf(err, errlen, "tenant key %s: short read", c->key_file);
		explicit_bzero(b, sizeof(b));
		return -1;
	}
	nk = swift_keys_parse(b, n, keys, max, why, sizeof(why));
	explicit_bzero(b, sizeof(b));
	if (nk < 0)
		snprintf(err, errlen, "tenant key %s: %s", c->key_file, why);
	return nk;
}

int swift_key_for(const struct swift_key *k, const char *peer)
{
	return !k->peer[0] || !strcmp(k->peer, peer);
}

/* find_key: the key with id that serves peer; -1 when there is none */
static int find_key(const struct swift_xenv *e, const char *id, const char *peer)
{
	int i;

	for (i = 0; i < e->nkeys; i++)
		if (!strcmp(e->keys[i].id, id) && swift_key_for(&e->keys[i], peer))
			return i;
	return -1;
}

/* MACs ------------------------------------------------------------------------ */

/* mac computes HMAC(key, role | a[alen] | b[blen]) */
static void mac(const uint8_t *key, size_t klen, char role, const void *a, size_t alen, const void *b, size_t blen,
		uint8_t out[32])
{
	uint8_t msg[1 + 32 + SWIFT_XBUF];

	msg[0] = (uint8_t)role;
	memcpy(msg + 1, a, alen);
	if (blen)
		memcpy(msg + 1 + alen, b, blen);
	hmac_sha256(key, klen, msg, 1 + alen + blen, out);
	explicit_bzero(msg, 1 + alen + blen); /* it may hold S */
}

/* transcript: H = SHA-256(hello | nonce_s | pub_s). */
static void transcript(struct xconn *x, const uint8_t pub_s[32])
{
	sha256_ctx c;

	sha256_init(&c);
	sha256_update(&c, x->hello, HELLO_LEN);
	sha256_update(&c, x->nonce_s, 16);
	sha256_update(&c, pub_s, 32);
	sha256_final(&c, x->transcript);
}

/* tag: TAG(role) over msg, under the session key. */
static void tag(const struct xconn *x, char role, const void *msg, size_t len, uint8_t out[32])
{
	uint8_t m[1 + SWIFT_XBUF];

	m[0] = (uint8_t)role;
	memcpy(m + 1, msg, len);
	hmac_sha256(x->session, sizeof(x->session), m, 1 + len, out);
}

void swift_seal(const uint8_t key[32], char role, uint8_t *buf, size_t len)
{
	uint8_t ctr[5], block[32];
	size_t off, i;
	uint32_t j;

	ctr[0] = (uint8_t)role;
	for (off = 0, j = 0; off < len; off += sizeof(block), j++) {
		put32(ctr + 1, j);
		hmac_sha256(key, 32, ctr, sizeof(ctr), block);
		for (i = 0; i < sizeof(block) && off + i < len; i++)
			buf[off + i] ^= block[i];
	}
}

/* derive: the session and seal keys (and a first exchange's link secret)
 * from the key, the transcript and S (see the top); S is wiped. */
static void derive(struct xconn *x, const struct swift_xenv *e)
{
	const struct swift_key *k = &e->keys[x->key];

	mac(k->key, k->len, 'K', x->transcript, 32, x->secret, 32, x->session);
	mac(k->key, k->len, 'E', x->transcript, 32, x->secret, 32, x->seal);
	if (x->flags & SWIFT_X_INITIAL) {
		mac(k->key, k->len, 'L', x->transcript, 32, x->secret, 32, x->link);
		explicit_bzero(x->secret, sizeof(x->secret));
	}
}

/* dial_key: the key to dial peer with: its nth key from the newest (n
 * wraps around), -1 when it has none */
static int dial_key(const struct swift_xenv *e, const char *peer, int n)
{
	int i, count = 0;

	for (i = 0; i < e->nkeys; i++)
		count += swift_key_for(&e->keys[i], peer);
	if (!count)
		return -1;
	n = (n % count + count) % count;
	for (i = 0; i < e->nkeys; i++)
		if (swift_key_for(&e->keys[i], peer) && n-- == 0)
			return i;
	return -1;
}

/* link_secret: the L of peer's live link into out; -1 when it has none. */
static int link_secret(const struct xconn *x, const struct swift_xenv *e, uint8_t out[32])
{
	const struct xconn *l = e->ops->link ? e->ops->link(e->ops->ctx, x->peer) : NULL;

	if (!l || swift_x25519_zero(l->link))
		return -1;
	memcpy(out, l->link, 32);
	return 0;
}

/* make_secret: S into x->secret: in a first exchange X25519 of our
 * ephemeral key (x->eph, wiped) with theirs, -1 when that is zero (their
 * key is of small order); in a later one the live link's L, -2 when there
 * is no link */
static int make_secret(struct xconn *x, const struct swift_xenv *e, const uint8_t theirs[32])
{
	if (!(x->flags & SWIFT_X_INITIAL))
		return link_secret(x, e, x->secret) ? -2 : 0;
	swift_x25519(x->secret, x->eph, theirs);
	explicit_bzero(x->eph, sizeof(x->eph));
	return swift_x25519_zero(x->secret) ? -1 : 0;
}

/* link_proof: HMAC(L, "P" | x's transcript), L the secret x stands on. */
static void link_proof(const struct xconn *x, uint8_t out[32])
{
	mac(x->secret, sizeof(x->secret), 'P', x->transcript, 32, NULL, 0, out);
}

/* ephemeral: a fresh X25519 key pair (priv, pub); -1 without randomness. */
static int ephemeral(uint8_t priv[32], uint8_t pub[32])
{
	if (getrandom(priv, 32, 0) != 32)
		return -1;
	swift_x25519_base(pub, priv);
	return 0;
}

/* server_key: the server's key pair for a first exchange into priv and
 * pub: the kept one while it is younger than SWIFT_XEPH_US, else a new one
 * (with no place to keep it, a new one each time). */
static int server_key(const struct swift_xenv *e, uint8_t priv[32], uint8_t pub[32])
{
	struct swift_xeph *k = e->eph;
	uint64_t now = swift_now_us();

	if (!k)
		return ephemeral(priv, pub);
	if (!k->born_us || now - k->born_us >= SWIFT_XEPH_US) {
		if (ephemeral(k->priv, k->pub))
			return -1;
		k->born_us = now;
	}
	memcpy(priv, k->priv, 32);
	memcpy(pub, k->pub, 32);
	return 0;
}

/* The state machines ------------------------------------------------------------- */

static void queue(struct xconn *x, const void *p, size_t n)
{
	if (x->outlen + n > sizeof(x->out))
		return; /* cannot happen: the largest message fits */
	memcpy(x->out + x->outlen, p, n);
	x->outlen += n;
}

static void expect(struct xconn *x, enum xstep step, size_t n)
{
	x->inlen = 0;
	if (n > sizeof(x->in)) {
		/* cannot happen with count <= SWIFT_X_MAX; refuse, never overrun */
		x->step = X_FLUSH;
		x->after_flush = (enum xstep)0;
		x->status = EPROTO;
		x->want = 0;
		return;
	}
	x->step = step;
	x->want = n;
}

/* finish: send what is queued; then the exchange is done (or held open).
 * The loop decides once the output is out: after_flush X_HELDOPEN means
 * held, else a nonzero status means refused, else done. */
static int finish(struct xconn *x, int held)
{
	x->step = X_FLUSH;
	x->after_flush = held ? X_HELDOPEN : (enum xstep)0;
	x->want = x->inlen = 0;
	return XC_MORE;
}

void swift_xconn_abort(struct xconn *x, const struct swift_xenv *e)
{
	int i;

	if (!x->committed)
		for (i = 0; i < x->nrows; i++)
			e->ops->destroy(e->ops->ctx, x->rows[i]);
	x->nrows = 0;
}

static int fail(struct xconn *x, const struct swift_xenv *e, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(struct xconn *x, const struct swift_xenv *e, int status, const char *fmt, ...)
{
	va_list ap;

	swift_xconn_abort(x, e);
	x->status = status;
	va_start(ap, fmt);
	vsnprintf(x->err, sizeof(x->err), fmt, ap);
	va_end(ap);
	return XC_FAIL;
}

void swift_xconn_client(struct xconn *x, const struct swift_xenv *e, int peer, int count, unsigned flags,
			const struct swift_qpinfo *foreign, const uint32_t *replaces)
{
	uint8_t h[HELLO_LEN];
	int i;

	memset(x, 0, sizeof(*x));
	x->client = 1;
	x->peer = peer;
	if (count < 1 || count > SWIFT_X_MAX || e->nkeys < 1) {
		/* the callers never ask for more: fail rather than overrun */
		snprintf(x->err, sizeof(x->err), "%d QPs in one exchange (1 to %d), %d keys", count, SWIFT_X_MAX,
			 e->nkeys);
		x->status = EINVAL;
		x->step = X_FLUSH;
		return;
	}
	x->count = count;
	x->flags = flags;
	x->key = dial_key(e, e->cfg->peers[peer].name, e->cfg->peers[peer].key_next);
	if (x->key < 0) {
		snprintf(x->err, sizeof(x->err),
			 "no key for peer %s (the shim hands a zygote the keys of its peers only)",
			 e->cfg->peers[peer].name);
		x->status = ENOKEY;
		x->step = X_FLUSH;
		return;
	}
	x->foreign = foreign != NULL;
	if (foreign)
		memcpy(x->local, foreign, sizeof(x->local[0]) * (size_t)count);
	for (i = 0; replaces && i < count; i++)
		x->replaces[i] = replaces[i];
	if (getrandom(x->nonce_i, sizeof(x->nonce_i), 0) != sizeof(x->nonce_i)) {
		/* a nonce that repeats would let a replayed challenge pass and
		 * reuse a keystream: no exchange without a fresh one */
		snprintf(x->err, sizeof(x->err), "getrandom: %s", strerror(errno));
		x->status = errno ? errno : EIO;
		x->step = X_FLUSH;
		return;
	}
	memset(h, 0, sizeof(h));
	if ((flags & SWIFT_X_INITIAL) && ephemeral(x->eph, h + OFF_PUB)) {
		snprintf(x->err, sizeof(x->err), "getrandom: %s", strerror(errno));
		x->status = errno ? errno : EIO;
		x->step = X_FLUSH;
		return;
	}
	memcpy(h, XMAGIC, 8);
	put_name(h + OFF_TENANT, SWIFT_NAME_MAX, e->cfg->tenant);
	put_name(h + OFF_FROM, SWIFT_NAME_MAX, e->cfg->name);
	put_name(h + OFF_TO, SWIFT_NAME_MAX, e->cfg->peers[peer].name);
	put_name(h + OFF_KEYID, SWIFT_KEY_ID_MAX, e->keys[x->key].id);
	memcpy(h + OFF_NONCE, x->nonce_i, 16);
	put32(h + OFF_FLAGS, flags);
	put32(h + OFF_COUNT, (uint32_t)count);
	/* the hello is kept: the transcript covers it */
	memcpy(x->hello, h, HELLO_LEN);
	queue(x, h, sizeof(h));
	expect(x, X_CHAL, CHAL_LEN);
}

void swift_xconn_server(struct xconn *x)
{
	memset(x, 0, sizeof(*x));
	x->peer = -1;
	expect(x, X_HELLO, HELLO_LEN);
}

/* refuse: the server answers a refusal (tagged once a session key
 * exists), then closes. */
static int refuse(struct xconn *x, const struct swift_xenv *e, int status, int tagged)
{
	uint8_t r[REPLY_LEN + MAC_LEN];

	swift_xconn_abort(x, e);
	put32(r, (uint32_t)status);
	put32(r + 4, 0);
	if (tagged)
		tag(x, 'R', r, REPLY_LEN, r + REPLY_LEN);
	else
		memset(r + REPLY_LEN, 0, MAC_LEN);
	queue(x, r, sizeof(r));
	x->status = status;
	return finish(x, 0);
}

/* decoy: a challenge whose proof proves nothing, for a hello the server
 * will not serve: the initiator learns nothing (its check fails), and no
 * proof of ours was computed for it. */
static int decoy(struct xconn *x)
{
	uint8_t ch[CHAL_LEN];

	if (getrandom(ch, sizeof(ch), 0) != sizeof(ch))
		memset(ch, 0, sizeof(ch));
	queue(x, ch, sizeof(ch));
	x->refused = 1;
	x->status = EACCES;
	return finish(x, 0);
}

/* local_addr: whether a (network order) is an IPv4 address of one of this
 * network namespace's interfaces (not merely bindable: ip_nonlocal_bind
 * lets any address be bound). */
static int local_addr(uint32_t a)
{
	struct ifaddrs *ifs, *i;
	int ok = 0;

	if (getifaddrs(&ifs))
		return 0;
	for (i = ifs; i && !ok; i = i->ifa_next)
		ok = i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		     ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == a;
	freeifaddrs(ifs);
	return ok;
}

/* peer_from: whether a connection from source (IPv4, network order) may
 * speak for p: only from its address (configured, or the one its host
 * name last resolved to and the tenant's rules allow: none while it has
 * not), or from loopback when that address is one of this network
 * namespace's (a process here can take either as its source). */
static int peer_from(const struct swift_peer *p, uint32_t source)
{
	struct in_addr a;

	if (inet_pton(AF_INET, p->host, &a) != 1)
		a.s_addr = p->addr;
	if (!a.s_addr)
		return 0;
	if (a.s_addr == source)
		return 1;
	return (ntohl(source) >> 24) == 127 && local_addr(a.s_addr);
}

/* a part of a step that found nothing wrong: the step goes on */
#define XC_GO 100

/* hello_parse reads a hello into x: the names, the nonce, the flags and
 * the count, each checked; XC_GO, or the failure. */
static int hello_parse(struct xconn *x, const struct swift_xenv *e)
{
	char t[160], f[160];
	uint32_t n;

	if (memcmp(x->in, XMAGIC, 8))
		return fail(x, e, EPROTO, "bad hello (not %s)", XMAGIC);
	if (get_name(x->in + OFF_TENANT, SWIFT_NAME_MAX, x->tenant) ||
	    get_name(x->in + OFF_FROM, SWIFT_NAME_MAX, x->from) || get_name(x->in + OFF_TO, SWIFT_NAME_MAX, x->to) ||
	    get_name(x->in + OFF_KEYID, SWIFT_KEY_ID_MAX, x->keyid)) {
		x->from[0] = 0;
		swift_esc((const char *)x->in + OFF_TENANT, SWIFT_NAME_MAX, t, sizeof(t));
		swift_esc((const char *)x->in + OFF_FROM, SWIFT_NAME_MAX, f, sizeof(f));
		return fail(x, e, EPROTO,
			    "bad hello: tenant \"%s\", name \"%s\", the name dialed or the key id "
			    "is not a printable name",
			    t, f);
	}
	memcpy(x->nonce_i, x->in + OFF_NONCE, 16);
	x->flags = get32(x->in + OFF_FLAGS);
	n = get32(x->in + OFF_COUNT);
	if ((x->flags & ~SWIFT_X_FLAGS) || ((x->flags & SWIFT_X_HELD) && (x->flags & ~SWIFT_X_HELD)) ||
	    ((x->flags & SWIFT_X_EPHEMERAL) && (x->flags & (SWIFT_X_INITIAL | SWIFT_X_LINK))) || n < 1 ||
	    n > SWIFT_X_MAX)
		return fail(x, e, EPROTO, "bad hello: flags %#x or count %u out of range", x->flags, n);
	/* a link is made by a first exchange only, and an ephemeral key
	 * comes in a first exchange only */
	if ((x->flags & SWIFT_X_LINK) && !(x->flags & SWIFT_X_INITIAL))
		return fail(x, e, EPROTO, "bad hello: a link from a later exchange");
	if (!(x->flags & SWIFT_X_INITIAL) && !swift_x25519_zero(x->in + OFF_PUB))
		return fail(x, e, EPROTO, "bad hello: an ephemeral key in a later exchange");
	x->count = (int)n;
	memcpy(x->hello, x->in, HELLO_LEN);
	if (getrandom(x->nonce_s, sizeof(x->nonce_s), 0) != sizeof(x->nonce_s))
		return fail(x, e, EIO, "getrandom: %s", strerror(errno));
	return XC_GO;
}

/* hello_refused tells whether this zygote will not serve the hello (why
 * in x->err): another tenant, another zygote dialed, a name not among its
 * peers, a key it does not hold for that name, a peer configured at
 * another address. It is answered with a challenge that proves nothing. */
static int hello_refused(struct xconn *x, const struct swift_xenv *e)
{
	if (strcmp(x->tenant, e->cfg->tenant)) {
		snprintf(x->err, sizeof(x->err), "claims tenant %s, failed authentication for tenant %s", x->tenant,
			 e->cfg->tenant);
		return 1;
	}
	if (strcmp(x->to, e->cfg->name)) {
		snprintf(x->err, sizeof(x->err), "dialed zygote %s, this is %s", x->to, e->cfg->name);
		return 1;
	}
	x->peer = swift_find_peer(e->cfg, x->from);
	if (x->peer < 0) {
		snprintf(x->err, sizeof(x->err), "tenant %s: not in this zygote's peer list", x->tenant);
		return 1;
	}
	/* the pair key of this name and ours: a holder of another pair's
	 * key proves nothing under this name */
	x->key = find_key(e, x->keyid, x->from);
	if (x->key < 0) {
		snprintf(x->err, sizeof(x->err),
			 "tenant %s: key %s is not in this node's keyring (rotated out, or "
			 "another node's local key)",
			 x->tenant, x->keyid);
		return 1;
	}
	/* a peer configured by its address dials from it: a key holder
	 * elsewhere cannot speak under its name */
	if (x->source && !peer_from(&e->cfg->peers[x->peer], x->source)) {
		struct in_addr src = {.s_addr = x->source};
		char sa[INET_ADDRSTRLEN];

		const struct swift_peer *p = &e->cfg->peers[x->peer];
		struct in_addr at = {.s_addr = p->addr};
		char pa[32] = "not resolved yet";

		inet_ntop(AF_INET, &src, sa, sizeof(sa));
		if (p->addr)
			inet_ntop(AF_INET, &at, pa, sizeof(pa));
		if (inet_pton(AF_INET, p->host, &at) == 1)
			snprintf(x->err, sizeof(x->err),
				 "tenant %s: peer %s is configured at %s, this connection comes from %s", x->tenant,
				 x->from, p->host, sa);
		else
			snprintf(x->err, sizeof(x->err),
				 "tenant %s: peer %s is configured at %s (%s), this connection comes from %s",
				 x->tenant, x->from, p->host, pa, sa);
		return 1;
	}
	return 0;
}

/* server_hello answers a hello with the challenge. */
static int server_hello(struct xconn *x, const struct swift_xenv *e)
{
	uint8_t ch[CHAL_LEN];
	int rc = hello_parse(x, e);

	if (rc != XC_GO)
		return rc;
	/* what this zygote will not serve is refused here, with a
	 * challenge that proves nothing */
	if (hello_refused(x, e))
		return decoy(x);
	/* S comes at AUTH, once the initiator proved the key: for a
	 * first exchange the Diffie-Hellman with our key pair (kept in
	 * x->eph until then), for a later one the link's secret */
	memset(ch, 0, sizeof(ch));
	if ((x->flags & SWIFT_X_INITIAL) && server_key(e, x->eph, ch + 16))
		return fail(x, e, EIO, "getrandom: %s", strerror(errno));
	memcpy(ch, x->nonce_s, 16);
	transcript(x, ch + 16);
	mac(e->keys[x->key].key, e->keys[x->key].len, 'S', x->transcript, 32, NULL, 0, ch + 48);
	queue(x, ch, sizeof(ch));
	expect(x, X_AUTH, AUTH_HEAD + (size_t)x->count * QPINFO_LEN + MAC_LEN);
	return XC_MORE;
}

/* auth_proved checks what the dialer sent at AUTH: its proof of the key,
 * then (with the session's keys) of the link, and its QPs' tag; it
 * unseals and reads the QPs. XC_GO, or the refusal. */
static int auth_proved(struct xconn *x, const struct swift_xenv *e)
{
	uint8_t want[32];
	int i;

	mac(e->keys[x->key].key, e->keys[x->key].len, 'I', x->transcript, 32, NULL, 0, want);
	if (!swift_mac_equal(x->in, want)) {
		explicit_bzero(x->eph, sizeof(x->eph));
		x->refused = 1;
		snprintf(x->err, sizeof(x->err), "tenant %s: failed authentication with key %s", x->tenant, x->keyid);
		return refuse(x, e, EACCES, 0);
	}
	/* the key is proved: S, then the session's keys (a later exchange
	 * without a link is refused below, with a tag) */
	switch (make_secret(x, e, x->hello + OFF_PUB)) {
	case -1:
		return fail(x, e, EPROTO, "tenant %s: %s sent an ephemeral key of small order", x->tenant, x->from);
	case -2:
		x->nolink = 1;
		break;
	}
	derive(x, e);
	/* a first exchange carries no link proof (zeros, so that no byte
	 * of the message goes unchecked); a later one comes from the other
	 * end of the live link */
	if (x->flags & SWIFT_X_INITIAL) {
		static const uint8_t zero[MAC_LEN];

		if (memcmp(x->in + MAC_LEN, zero, MAC_LEN)) {
			snprintf(x->err, sizeof(x->err),
				 "tenant %s: its exchange was changed in transit (a link proof in a first exchange)",
				 x->tenant);
			return refuse(x, e, EBADMSG, 1);
		}
	} else {
		/* it stands on the live link (its secret was taken just now) */
		if (x->nolink) {
			snprintf(x->err, sizeof(x->err),
				 "tenant %s: a later exchange, and no live link with %s to prove it against", x->tenant,
				 x->from);
			return refuse(x, e, ENOLINK, 1);
		}
		link_proof(x, want);
		explicit_bzero(x->secret, sizeof(x->secret));
		if (!swift_mac_equal(x->in + MAC_LEN, want)) {
			x->refused = 1;
			snprintf(x->err, sizeof(x->err),
				 "tenant %s: a later exchange under the name %s, not from the zygote that holds its "
				 "link",
				 x->tenant, x->from);
			return refuse(x, e, EACCES, 1);
		}
	}
	tag(x, 'Q', x->in + AUTH_HEAD, (size_t)x->count * QPINFO_LEN, want);
	if (!swift_mac_equal(x->in + AUTH_HEAD + (size_t)x->count * QPINFO_LEN, want)) {
		snprintf(x->err, sizeof(x->err), "tenant %s: its QPs were changed in transit (tag mismatch)",
			 x->tenant);
		return refuse(x, e, EBADMSG, 1);
	}
	swift_seal(x->seal, 'Q', x->in + AUTH_HEAD, (size_t)x->count * QPINFO_LEN);
	for (i = 0; i < x->count; i++)
		if (get_qpinfo(x->in + AUTH_HEAD + (size_t)i * QPINFO_LEN, &x->remote[i])) {
			snprintf(x->err, sizeof(x->err), "a QP number or PSN out of range");
			return refuse(x, e, EPROTO, 1);
		}
	return XC_GO;
}

/* auth_rows makes and connects the rows for the dialer's QPs, once it
 * may have them. XC_GO, or the refusal. */
static int auth_rows(struct xconn *x, const struct swift_xenv *e)
{
	int i;

	/* what this zygote cannot hold for the peer is refused before
	 * any row exists */
	if (e->ops->admit) {
		int st = e->ops->admit(e->ops->ctx, x->peer, x->flags, x->count, x->err, sizeof(x->err));

		if (st)
			return refuse(x, e, st, 1);
	}
	for (i = 0; i < x->count; i++)
		if (x->remote[i].replaces && e->ops->replaced)
			e->ops->replaced(e->ops->ctx, x->peer, x->remote[i].replaces);
	for (i = 0; i < x->count; i++) {
		int row = e->ops->create(e->ops->ctx, x->peer, &x->local[i], x->err, sizeof(x->err));

		if (row < 0)
			return refuse(x, e, errno ? errno : EIO, 1);
		x->rows[x->nrows++] = row;
		if (e->ops->connect(e->ops->ctx, row, &x->remote[i])) {
			snprintf(x->err, sizeof(x->err), "connect QP: %s", strerror(errno));
			return refuse(x, e, errno ? errno : EIO, 1);
		}
	}
	return XC_GO;
}

/* server_auth takes the dialer's proof and QPs, makes ours, and replies
 * with them. */
static int server_auth(struct xconn *x, const struct swift_xenv *e)
{
	uint8_t r[REPLY_LEN + SWIFT_X_MAX * QPINFO_LEN + MAC_LEN];
	uint32_t n;
	int i, rc;

	if ((rc = auth_proved(x, e)) != XC_GO || (rc = auth_rows(x, e)) != XC_GO)
		return rc;
	put32(r, 0);
	put32(r + 4, (uint32_t)x->count);
	for (i = 0; i < x->count; i++)
		put_qpinfo(r + REPLY_LEN + (size_t)i * QPINFO_LEN, &x->local[i]);
	n = REPLY_LEN + (uint32_t)x->count * QPINFO_LEN;
	swift_seal(x->seal, 'R', r + REPLY_LEN, n - REPLY_LEN);
	tag(x, 'R', r, n, r + n);
	queue(x, r, n + MAC_LEN);
	expect(x, X_CONFIRM, MAC_LEN);
	return XC_MORE;
}

/* server_confirm takes the dialer's confirmation: ours are kept. */
static int server_confirm(struct xconn *x, const struct swift_xenv *e)
{
	uint8_t want[32];

	tag(x, 'C', "", 0, want);
	if (!swift_mac_equal(x->in, want))
		return fail(x, e, EBADMSG, "tenant %s: the confirmation was changed in transit", x->tenant);
	/* the initiator has connected its side: ours are kept */
	x->committed = 1;
	tag(x, 'A', "", 0, want);
	queue(x, want, MAC_LEN);
	return finish(x, (x->flags & (SWIFT_X_HELD | SWIFT_X_LINK)) != 0);
}

static int server_advance(struct xconn *x, const struct swift_xenv *e)
{
	switch (x->step) {
	case X_HELLO:
		return server_hello(x, e);
	case X_AUTH:
		return server_auth(x, e);
	case X_CONFIRM:
		return server_confirm(x, e);
	default:
		return fail(x, e, EPROTO, "unexpected input");
	}
}

/* chal_proved checks the server's challenge: its proof of the key, its
 * name and our hello; then S and the session's keys, and (a later
 * exchange) our link proof into proof. XC_GO, or the failure. */
static int chal_proved(struct xconn *x, const struct swift_xenv *e, uint8_t proof[MAC_LEN])
{
	const struct swift_peer *p = &e->cfg->peers[x->peer];
	const struct swift_key *k = &e->keys[x->key];
	uint8_t want[32];

	memcpy(x->nonce_s, x->in, 16);
	transcript(x, x->in + 16);
	/* the server proves the key, its name and our hello first: a
	 * server that cannot gets nothing of ours */
	mac(k->key, k->len, 'S', x->transcript, 32, NULL, 0, want);
	if (!swift_mac_equal(x->in + 48, want)) {
		explicit_bzero(x->eph, sizeof(x->eph));
		x->refused = 1;
		return fail(x, e, EACCES, "peer %s failed authentication (not tenant %s with key %s, or not zygote %s)",
			    p->name, e->cfg->tenant, k->id, p->name);
	}
	memset(proof, 0, MAC_LEN);
	if (!(x->flags & SWIFT_X_INITIAL) && !swift_x25519_zero(x->in + 16))
		return fail(x, e, EPROTO, "peer %s sent an ephemeral key in a later exchange", p->name);
	switch (make_secret(x, e, x->in + 16)) {
	case -1:
		return fail(x, e, EPROTO, "peer %s sent an ephemeral key of small order", p->name);
	case -2:
		return fail(x, e, ENOLINK, "a later exchange with %s needs our live link with it, and there is none",
			    p->name);
	}
	derive(x, e);
	if (!(x->flags & SWIFT_X_INITIAL))
		link_proof(x, proof);
	explicit_bzero(x->secret, sizeof(x->secret));
	return XC_GO;
}

/* client_chal answers the challenge: our proofs, and our QPs (made now,
 * once the server proved the key, unless they are a function's). */
static int client_chal(struct xconn *x, const struct swift_xenv *e)
{
	const struct swift_key *k = &e->keys[x->key];
	uint8_t m[AUTH_HEAD + SWIFT_X_MAX * QPINFO_LEN + MAC_LEN];
	size_t n;
	int i, rc;

	if ((rc = chal_proved(x, e, m + MAC_LEN)) != XC_GO)
		return rc;
	for (i = 0; !x->foreign && i < x->count; i++) {
		int row = e->ops->create(e->ops->ctx, x->peer, &x->local[i], x->err, sizeof(x->err));

		if (row < 0) {
			x->status = errno ? errno : EIO;
			swift_xconn_abort(x, e);
			return XC_FAIL;
		}
		x->rows[x->nrows++] = row;
	}
	mac(k->key, k->len, 'I', x->transcript, 32, NULL, 0, m);
	for (i = 0; i < x->count; i++) {
		x->local[i].replaces = x->replaces[i];
		put_qpinfo(m + AUTH_HEAD + (size_t)i * QPINFO_LEN, &x->local[i]);
	}
	n = (size_t)x->count * QPINFO_LEN;
	swift_seal(x->seal, 'Q', m + AUTH_HEAD, n);
	tag(x, 'Q', m + AUTH_HEAD, n, m + AUTH_HEAD + n);
	queue(x, m, AUTH_HEAD + n + MAC_LEN);
	expect(x, X_REPLY, REPLY_LEN);
	return XC_MORE;
}

/* client_reply reads the reply's header: a refusal, or the count. */
static int client_reply(struct xconn *x, const struct swift_xenv *e)
{
	const struct swift_peer *p = &e->cfg->peers[x->peer];

	x->status = (int)get32(x->in);
	if (x->status) {
		/* a refusal: its tag follows, but nothing is acted on */
		x->refused = x->status == EACCES || x->status == EPERM;
		return fail(x, e, x->status, "peer %s refused: %s", p->name,
			    x->status < 4096 ? strerror(x->status) : "unknown status");
	}
	if (get32(x->in + 4) != (uint32_t)x->count)
		return fail(x, e, EPROTO, "peer %s answered with another QP count", p->name);
	memcpy(x->reply, x->in, REPLY_LEN);
	expect(x, X_THEIRS, (size_t)x->count * QPINFO_LEN + MAC_LEN);
	return XC_MORE;
}

/* client_theirs takes the server's QPs, connects ours to them, and
 * confirms. */
static int client_theirs(struct xconn *x, const struct swift_xenv *e)
{
	const struct swift_peer *p = &e->cfg->peers[x->peer];
	uint8_t want[32], m[REPLY_LEN + SWIFT_X_MAX * QPINFO_LEN];
	size_t n;
	int i;

	n = (size_t)x->count * QPINFO_LEN;
	memcpy(m, x->reply, REPLY_LEN);
	memcpy(m + REPLY_LEN, x->in, n);
	tag(x, 'R', m, REPLY_LEN + n, want);
	if (!swift_mac_equal(x->in + n, want))
		return fail(x, e, EBADMSG, "peer %s: its QPs were changed in transit (tag mismatch)", p->name);
	swift_seal(x->seal, 'R', x->in, n);
	for (i = 0; i < x->count; i++)
		if (get_qpinfo(x->in + (size_t)i * QPINFO_LEN, &x->remote[i]))
			return fail(x, e, EPROTO, "peer %s sent a QP number or PSN out of range", p->name);
	for (i = 0; !x->foreign && i < x->count; i++)
		if (e->ops->connect(e->ops->ctx, x->rows[i], &x->remote[i]))
			return fail(x, e, errno ? errno : EIO, "connect QP to %s: %s", p->name, strerror(errno));
	tag(x, 'C', "", 0, want);
	queue(x, want, MAC_LEN);
	expect(x, X_ACK, MAC_LEN);
	return XC_MORE;
}

/* client_ack takes the server's acknowledgement: the QPs are kept. */
static int client_ack(struct xconn *x, const struct swift_xenv *e)
{
	const struct swift_peer *p = &e->cfg->peers[x->peer];
	uint8_t want[32];

	tag(x, 'A', "", 0, want);
	if (!swift_mac_equal(x->in, want))
		return fail(x, e, EBADMSG, "peer %s: its acknowledgement was changed in transit", p->name);
	x->committed = 1;
	x->want = x->inlen = 0;
	if (x->flags & (SWIFT_X_HELD | SWIFT_X_LINK)) {
		x->step = X_HELDOPEN;
		return XC_HELD;
	}
	x->step = (enum xstep)0;
	return XC_DONE;
}

static int client_advance(struct xconn *x, const struct swift_xenv *e)
{
	switch (x->step) {
	case X_CHAL:
		return client_chal(x, e);
	case X_REPLY:
		return client_reply(x, e);
	case X_THEIRS:
		return client_theirs(x, e);
	case X_ACK:
		return client_ack(x, e);
	default:
		return fail(x, e, EPROTO, "unexpected input from %s", e->cfg->peers[x->peer].name);
	}
}

int swift_xconn_advance(struct xconn *x, const struct swift_xenv *e, const char *addr)
{
	(void)addr;
	if (x->inlen != x->want || x->want == 0)
		return XC_MORE;
	return x->client ? client_advance(x, e) : server_advance(x, e);
}

int swift_dial(uint32_t addr, int port, int nonblock)
{
	struct sockaddr_in sa;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = addr;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* swift_xconn_run drives a client over fd until it ends (swift-warm). */
int swift_xconn_run(int fd, struct xconn *x, const struct swift_xenv *e, int timeout_ms)
{
	uint64_t deadline = swift_now_us() + (uint64_t)timeout_ms * 1000;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int64_t left = (int64_t)(deadline - swift_now_us()) / 1000;
		ssize_t n;
		int rc;

		if (x->outoff < x->outlen) {
			n = send(fd, x->out + x->outoff, x->outlen - x->outoff, MSG_NOSIGNAL);
			if (n < 0 && errno != EINTR && errno != EAGAIN)
				goto io;
			if (n > 0)
				x->outoff += (size_t)n;
			if (x->outoff == x->outlen)
				x->outoff = x->outlen = 0;
			continue;
		}
		if (x->step == X_FLUSH) {
			swift_xconn_abort(x, e);
			return XC_FAIL;
		}
		if (left <= 0) {
			errno = ETIMEDOUT;
			goto io;
		}
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		n = recv(fd, x->in + x->inlen, x->want - x->inlen, 0);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 0)
				errno = ECONNRESET;
			goto io;
		}
		x->inlen += (size_t)n;
		rc = swift_xconn_advance(x, e, "");
		if (rc == XC_MORE)
			continue;
		/* the last message out (the confirmation) before returning */
		while (rc != XC_FAIL && x->outoff < x->outlen) {
			n = send(fd, x->out + x->outoff, x->outlen - x->outoff, MSG_NOSIGNAL);
			if (n <= 0)
				break;
			x->outoff += (size_t)n;
		}
		return rc;
	}
io:
	snprintf(x->err, sizeof(x->err), "exchange with %s: %s", e->cfg->peers[x->peer].name, strerror(errno));
	swift_xconn_abort(x, e);
	return XC_FAIL;
}
