/*
 * A verbs program as a user writes one, for the lab's tests of what the specification says
 * about errors: it runs unchanged on any RDMA device, and prints what it saw as
 * `RESULT <name> <value>` lines for the test to read.
 *
 *   verbs_check server CASE            waits for a client on TCP port 18600
 *   verbs_check client CASE PEER_IP    connects to a server
 *   verbs_check alone unsupported      no peer: verbs the device refuses, and QPs in RESET
 *
 * Cases (both ends run the same one):
 *   write-outside   the client writes beyond the end of the server's memory region
 *   read-no-access  the client reads from a server QP that allows remote writes only
 *   qp-err          the client drives its connected QP into ERR with requests posted
 *   victim          the server writes to the client without end; the test SIGKILLs it
 *                   and the client, sending to it all along, reports how its QP ended
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PORT 18600
#define MR_LEN 4096
#define DEPTH 64

struct peer {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	uint8_t gid[16];
};

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
	union ibv_gid gid;
};

static void die(const char *what)
{
	fprintf(stderr, "verbs_check: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void result(const char *name, long value)
{
	printf("RESULT %s %ld\n", name, value);
	fflush(stdout);
}

static struct ibv_context *open_device(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n == 0)
		die("no RDMA device");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device");
	ibv_free_device_list(list);
	return ctx;
}

static void open_end(struct end *e, int mr_access, int qp_access)
{
	e->ctx = open_device();
	e->pd = ibv_alloc_pd(e->ctx);
	if (!e->pd)
		die("ibv_alloc_pd");
	e->cq = ibv_create_cq(e->ctx, 2 * DEPTH, NULL, NULL, 0);
	if (!e->cq)
		die("ibv_create_cq");
	e->buf = calloc(1, MR_LEN);
	e->mr = ibv_reg_mr(e->pd, e->buf, MR_LEN, mr_access);
	if (!e->mr)
		die("ibv_reg_mr");
	struct ibv_qp_init_attr init = {
		.send_cq = e->cq,
		.recv_cq = e->cq,
		.cap = {.max_send_wr = DEPTH, .max_recv_wr = DEPTH, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	e->qp = ibv_create_qp(e->pd, &init);
	if (!e->qp)
		die("ibv_create_qp");
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = qp_access,
	};
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("to INIT");
	if (ibv_query_gid(e->ctx, 1, 0, &e->gid))
		die("ibv_query_gid");
}

/* Short timeouts and few retries: a peer that is gone is found out in a few tens of ms. */
static void connect_end(struct end *e, const struct peer *p)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = p->qpn,
		.rq_psn = p->psn,
		.max_dest_rd_atomic = 4,
		.min_rnr_timer = 1,
		.ah_attr = {.is_global = 1, .port_num = 1, .grh = {.hop_limit = 64, .sgid_index = 0}},
	};
	memcpy(a.ah_attr.grh.dgid.raw, p->gid, 16);
	if (ibv_modify_qp(e->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("to RTR");
	struct ibv_qp_attr s = {
		.qp_state = IBV_QPS_RTS,
		.timeout = 12,
		.retry_cnt = 3,
		.rnr_retry = 7,
		.sq_psn = 1,
		.max_rd_atomic = 4,
	};
	if (ibv_modify_qp(e->qp, &s,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				  IBV_QP_MAX_QP_RD_ATOMIC))
		die("to RTS");
}

/* Exchanges QP facts over TCP: the server (peer_ip NULL) listens, the client connects. */
static int exchange(const char *peer_ip, const struct end *e, struct peer *p)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(PORT)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (peer_ip) {
		inet_pton(AF_INET, peer_ip, &sa.sin_addr);
		int tries = 0;
		while (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
			if (++tries == 100)
				die("connect");
			close(fd);
			fd = socket(AF_INET, SOCK_STREAM, 0);
			usleep(50000);
		}
	} else {
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 1))
			die("listen");
		int c = accept(fd, NULL, NULL);
		if (c < 0)
			die("accept");
		close(fd);
		fd = c;
	}
	struct peer mine = {.qpn = e->qp->qp_num, .psn = 1, .rkey = e->mr->rkey, .addr = (uintptr_t)e->buf};
	memcpy(mine.gid, e->gid.raw, 16);
	if (write(fd, &mine, sizeof mine) != sizeof mine || read(fd, p, sizeof *p) != sizeof *p)
		die("exchanging QP facts");
	return fd;
}

/* Waits for one completion and returns its status. */
static int wait_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int n;
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0)
		;
	if (n < 0)
		die("ibv_poll_cq");
	return wc->status;
}

static void post_write(struct end *e, const struct peer *p, uint64_t offset, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf, .length = len, .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {
		.wr_id = id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = {.remote_addr = p->addr + offset, .rkey = p->rkey},
	}, *bad;
	if (ibv_post_send(e->qp, &wr, &bad))
		die("ibv_post_send");
}

static void post_recv(struct end *e, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf, .length = MR_LEN, .lkey = e->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
	if (ibv_post_recv(e->qp, &wr, &bad))
		die("ibv_post_recv");
}

/* Both ends are in RTS before either sends: a request reaching a responder still in RTR would
 * be answered there, and a responder that found it invalid moves to ERR, where its own move to
 * RTS then fails (perftest syncs the same way after connecting). */
static void sync_ready(int fd)
{
	char c = 'r';
	if (write(fd, &c, 1) != 1 || read(fd, &c, 1) != 1)
		die("syncing with the other end");
}

/* Waits for the other end to say it is done (or to be gone). */
static void wait_done(int fd)
{
	char c;
	if (read(fd, &c, 1) < 0)
		die("waiting for the other end");
}

static const int ALL = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

static int two_ends(const char *role, const char *kase, const char *peer_ip)
{
	int server = strcmp(role, "server") == 0;
	int qp_access = ALL;
	if (strcmp(kase, "read-no-access") == 0 && server)
		qp_access = IBV_ACCESS_REMOTE_WRITE;
	struct end e;
	struct peer p;
	open_end(&e, ALL, qp_access);
	if (strcmp(kase, "victim") == 0 && !server)
		for (int i = 0; i < DEPTH; i++)
			post_recv(&e, 1000 + i);
	int fd = exchange(server ? NULL : peer_ip, &e, &p);
	connect_end(&e, &p);
	sync_ready(fd);
	struct ibv_wc wc;
	if (server) {
		if (strcmp(kase, "victim") == 0) {
			/* Writes to the client without end, as a transfer in progress. */
			uint64_t id = 0, outstanding = 0;
			result("victim-ready", getpid());
			for (;;) {
				while (outstanding < DEPTH / 2) {
					post_write(&e, &p, 0, MR_LEN, id++);
					outstanding++;
				}
				if (wait_one(e.cq, &wc) != IBV_WC_SUCCESS) {
					result("victim-failed", wc.status);
					return 1;
				}
				outstanding--;
			}
		}
		wait_done(fd);
		return 0;
	}
	if (strcmp(kase, "write-outside") == 0) {
		post_write(&e, &p, 0, 64, 1);
		result("inside", wait_one(e.cq, &wc));
		post_write(&e, &p, MR_LEN - 32, 64, 2);
		result("outside", wait_one(e.cq, &wc));
		/* The QP is in ERR now: what is posted after completes flushed. */
		post_write(&e, &p, 0, 64, 3);
		result("after", wait_one(e.cq, &wc));
	} else if (strcmp(kase, "read-no-access") == 0) {
		struct ibv_sge sge = {.addr = (uintptr_t)e.buf, .length = 64, .lkey = e.mr->lkey};
		struct ibv_send_wr wr = {
			.wr_id = 7,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_READ,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = {.remote_addr = p.addr, .rkey = p.rkey},
		}, *bad;
		if (ibv_post_send(e.qp, &wr, &bad))
			die("ibv_post_send");
		result("read", wait_one(e.cq, &wc));
		post_write(&e, &p, 0, 64, 8);
		result("after", wait_one(e.cq, &wc));
	} else if (strcmp(kase, "qp-err") == 0) {
		post_recv(&e, 11);
		post_recv(&e, 12);
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		result("modify-errno", ibv_modify_qp(e.qp, &a, IBV_QP_STATE));
		result("recv", wait_one(e.cq, &wc));
		result("recv-id", (long)wc.wr_id);
		result("recv", wait_one(e.cq, &wc));
		post_write(&e, &p, 0, 64, 13);
		result("send", wait_one(e.cq, &wc));
		struct ibv_qp_attr q;
		struct ibv_qp_init_attr qi;
		if (ibv_query_qp(e.qp, &q, IBV_QP_STATE, &qi))
			die("ibv_query_qp");
		result("state", q.qp_state);
	} else if (strcmp(kase, "victim") == 0) {
		/* Sends to the victim all along; the test kills it, and this QP's last requests
		 * find no one to answer them. */
		int outstanding = 0;
		for (;;) {
			while (outstanding < 4) {
				post_write(&e, &p, 0, 1024, 100);
				outstanding++;
			}
			int s = wait_one(e.cq, &wc);
			if (wc.wr_id >= 1000) {
				/* One of the victim's writes? Writes consume nothing: a receive completion
				 * would be a bug. */
				result("unexpected-receive", s);
				return 1;
			}
			if (s != IBV_WC_SUCCESS) {
				result("peer", s);
				break;
			}
			outstanding--;
		}
	}
	if (write(fd, "x", 1) != 1)
		die("telling the server");
	ibv_destroy_qp(e.qp);
	ibv_dereg_mr(e.mr);
	ibv_destroy_cq(e.cq);
	ibv_dealloc_pd(e.pd);
	ibv_close_device(e.ctx);
	result("closed", 0);
	return 0;
}

/* Verbs the device does not do, and requests it must refuse: each an errno, none a hang. */
static int unsupported(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	errno = 0;
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	result("alloc_mw", mw ? 0 : errno);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq");
	struct ibv_qp_init_attr uc = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_UC,
	};
	errno = 0;
	struct ibv_qp *qp = ibv_create_qp(pd, &uc);
	result("create_uc_qp", qp ? 0 : errno);
	char *buf = calloc(1, 4096);
	errno = 0;
	struct ibv_mr *bad_mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE);
	result("reg_mr_remote_write_without_local_write", bad_mr ? 0 : errno);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	struct ibv_qp_init_attr rc = uc;
	rc.qp_type = IBV_QPT_RC;
	qp = ibv_create_qp(pd, &rc);
	if (!qp)
		die("ibv_create_qp");
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
	struct ibv_send_wr swr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND}, *sbad;
	result("post_send_in_reset", ibv_post_send(qp, &swr, &sbad));
	struct ibv_recv_wr rwr = {.sg_list = &sge, .num_sge = 1}, *rbad;
	result("post_recv_in_reset", ibv_post_recv(qp, &rwr, &rbad));
	/* RESET to RTS directly is not a transition the specification has. */
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS};
	result("modify_reset_to_rts", ibv_modify_qp(qp, &a, IBV_QP_STATE));
	errno = 0;
	struct ibv_cq *huge = ibv_create_cq(ctx, 1 << 30, NULL, NULL, 0);
	result("create_cq_too_large", huge ? 0 : errno);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	result("closed", 0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "alone") == 0 && strcmp(argv[2], "unsupported") == 0)
		return unsupported();
	if (argc >= 3 && strcmp(argv[1], "server") == 0)
		return two_ends("server", argv[2], NULL);
	if (argc >= 4 && strcmp(argv[1], "client") == 0)
		return two_ends("client", argv[2], argv[3]);
	fprintf(stderr, "usage: verbs_check server CASE | client CASE PEER_IP | alone unsupported\n");
	return 2;
}
