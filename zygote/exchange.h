/* The QP exchange between zygotes (exchange.c): keys, the wire
 * format and a non-blocking state machine for both ends. */
#ifndef SWIFT_EXCHANGE_H
#define SWIFT_EXCHANGE_H

#include <stddef.h>
#include <stdint.h>
#include "bounds.h"
#include "cfg.h"
#include "qpinfo.h"

/* ---- the exchange (exchange.c) ------------------------------------------ */

#define SWIFT_X_INITIAL 1u   /* the initiator (re)builds its pool to this peer */
#define SWIFT_X_EPHEMERAL 2u /* a one-off client: its QPs are not kept */
#define SWIFT_X_HELD \
	4u /* a function's own QPs: the server keeps its
			      * side while the connection stays open */
#define SWIFT_X_LINK \
	8u /* the connection stays open as the two
			      * zygotes' link: when it closes, every QP
			      * between them goes */
#define SWIFT_X_FLAGS (SWIFT_X_INITIAL | SWIFT_X_EPHEMERAL | SWIFT_X_HELD | SWIFT_X_LINK)

/* A tenant key: the same on every node it was provisioned to. */
#define SWIFT_KEY_ID_MAX 16
/* A tenant ring holds at most 8 keys; a zygote holds them for each peer
 * (the shim hands it pair keys: keys.PairRing). */
#define SWIFT_RING_MAX 8
#define SWIFT_KEYS_MAX (SWIFT_RING_MAX * SWIFT_MAX_PEERS)
/* the most bytes the shim hands a zygote (le32 length, then the ring) */
#define SWIFT_HANDOFF_MAX (64 * 1024 - 4)
struct swift_key {
	char id[SWIFT_KEY_ID_MAX + 1];
	uint8_t key[64];
	size_t len;
	char peer[SWIFT_NAME_MAX]; /* the peer it is for ("": every peer) */
};

/* swift_seal XORs buf with role's keystream under key (block j is
 * HMAC-SHA-256(key, role | le32 j)): it encrypts and, applied again,
 * decrypts the exchange's QP parameters. */
void swift_seal(const uint8_t key[32], char role, uint8_t *buf, size_t len);
/* Parse a keyring ("<id> <64 hex digits>" per line, newest first; a third
 * field names the one peer a key is for: the pair keys the shim hands a
 * zygote) or a legacy key (16 to 64 raw bytes: one key, id "local").
 * Returns the number of keys, or -1 with err. */
int swift_keys_parse(const uint8_t *b, size_t n, struct swift_key *keys, int max, char *err, size_t errlen);
/* swift_key_for: whether k serves peer (a pair key of that peer's, or a
 * key of a ring, which serves every peer). */
int swift_key_for(const struct swift_key *k, const char *peer);
/* Load the keys of a description without a shim's handoff: its key_file
 * (a regular file of 1 to 4096 bytes, opened without following a link
 * and without blocking), or with none the tenant's name as the key (tests
 * without a shim). Returns the number of keys, or -1 with err. */
int swift_keys_load(const struct swift_cfg *c, struct swift_key *keys, int max, char *err, size_t errlen);

/* Row operations the exchange calls; the unit tests supply fakes. */
struct swift_rowops {
	void *ctx;
	int (*create)(void *ctx, int peer, struct swift_qpinfo *local, char *err, size_t errlen);
	int (*connect)(void *ctx, int row, const struct swift_qpinfo *remote);
	void (*destroy)(void *ctx, int row);
	/* server: a peer replaced its QP `qpn` (our row's remote) */
	void (*replaced)(void *ctx, int peer, uint32_t qpn);
	/* server (may be NULL): whether the authenticated peer may have count
	 * more rows for an exchange with these flags: 0, or the errno it is
	 * refused with before any row exists */
	int (*admit)(void *ctx, int peer, unsigned flags, int count, char *err, size_t errlen);
	/* (may be NULL) the exchange that is peer's live link, on either
	 * side, or NULL: a later exchange proves itself against it */
	const struct xconn *(*link)(void *ctx, int peer);
};

/* A server's ephemeral X25519 key pair, kept for a while (SWIFT_XEPH_US)
 * so that a hello, which proves nothing yet, costs no X25519: the shared
 * secret is computed only once the dialer proved the key. Each session
 * still has a secret of its own (the dialer's key is fresh). */
#define SWIFT_XEPH_US (60 * 1000000ull)
struct swift_xeph {
	uint8_t priv[32], pub[32];
	uint64_t born_us; /* 0: none yet */
};

struct swift_xenv {
	const struct swift_cfg *cfg;
	const struct swift_key *keys; /* keys[0] is the one dialed with */
	int nkeys;
	const struct swift_rowops *ops;
	struct swift_xeph *eph; /* the server's key pair (NULL: one per hello) */
};

enum xstep {
	X_CONNECTING = 1, /* client: non-blocking connect in progress */
	X_HELLO,          /* server: waiting for the hello */
	X_CHAL,           /* client: waiting for the challenge */
	X_AUTH,           /* server: waiting for the proof and the QPs */
	X_REPLY,          /* client: waiting for the reply header */
	X_THEIRS,         /* client: waiting for the server's QPs and tag */
	X_CONFIRM,        /* server: waiting for the client's confirmation */
	X_ACK,            /* client: waiting for the server's acknowledgement */
	X_FLUSH,          /* output queued; done once it is sent */
	X_HELDOPEN,       /* held or link: open until either side closes */
};

#define SWIFT_XBUF 4096

struct xconn {
	int client;
	enum xstep step;
	enum xstep after_flush;
	unsigned flags;
	int peer;        /* cfg index; the server learns it */
	uint32_t source; /* server: the dialer's IPv4 (network order), 0 unknown */
	int count;
	int foreign; /* client: QPs of a function, no rows */
	int key;     /* index of the key in use */
	uint8_t nonce_i[16], nonce_s[16];
	uint8_t hello[8 + 3 * SWIFT_NAME_MAX + SWIFT_KEY_ID_MAX + 24 + 32]; /* as sent */
	uint8_t reply[8];                                                   /* the reply's header, for its tag */
	uint8_t transcript[32]; /* SHA-256 of the hello, nonce_s and pub_s */
	uint8_t eph[32];        /* client, first exchange: its ephemeral
	                              * X25519 key until the challenge */
	uint8_t secret[32];     /* S: the ephemeral X25519 secret (a first
	                              * exchange) or the link's L (a later one) */
	int nolink;             /* server: a later exchange, and no link */
	uint8_t link[32];       /* a first exchange: the link's secret L */
	uint8_t session[32];    /* tags every message after the proofs */
	uint8_t seal[32];       /* encrypts the QP parameters (swift_seal) */
	char tenant[SWIFT_NAME_MAX], from[SWIFT_NAME_MAX], to[SWIFT_NAME_MAX];
	char keyid[SWIFT_KEY_ID_MAX + 1];
	int rows[SWIFT_X_MAX];
	int nrows;     /* rows this exchange created */
	int committed; /* rows handed to the caller: not destroyed */
	uint32_t replaces[SWIFT_X_MAX];
	struct swift_qpinfo local[SWIFT_X_MAX];
	struct swift_qpinfo remote[SWIFT_X_MAX];
	uint8_t in[SWIFT_XBUF];
	size_t inlen, want;
	uint8_t out[SWIFT_XBUF];
	size_t outlen, outoff;
	int status;  /* reply status (errno) */
	int refused; /* authentication failed */
	char err[512];
};

enum { XC_MORE = 0, XC_DONE = 1, XC_HELD = 2, XC_FAIL = -1 };

/* Client: start (after connect). `local` and count are the function's
 * QPs when foreign; else count rows are created once the server proves
 * the key. replaces (may be NULL) names the server's QPNs they replace. */
void swift_xconn_client(struct xconn *x, const struct swift_xenv *e, int peer, int count, unsigned flags,
			const struct swift_qpinfo *foreign, const uint32_t *replaces);
void swift_xconn_server(struct xconn *x);
/* Process x->in once x->inlen == x->want: consume it, queue output, set
 * the next want. Returns XC_MORE, or XC_DONE/XC_HELD/XC_FAIL (x->err).
 * On XC_FAIL the rows this exchange created are destroyed. */
int swift_xconn_advance(struct xconn *x, const struct swift_xenv *e, const char *addr);
/* Destroy what the exchange created and did not commit (failure,
 * deadline, peer gone). */
void swift_xconn_abort(struct xconn *x, const struct swift_xenv *e);
/* Drive a client to its end over a blocking fd (swift-warm). */
int swift_xconn_run(int fd, struct xconn *x, const struct swift_xenv *e, int timeout_ms);
int swift_dial(uint32_t addr, int port, int nonblock);

#endif
