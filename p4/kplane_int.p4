/*
 * kplane_int.p4 — INT source / transit / sink with sink event detection and Telemetry
 * Report v2.0 generation, for the v1model architecture (BMv2 simple_switch).
 *
 * Wire formats: INT v2.1 INT-MD over TCP/UDP flagged by DSCP (shim NPT 0), Telemetry Report
 * v2.0 (group header + one INT individual report carrying the sink's own metadata and the
 * original packet with its INT stack) — see docs/wire-formats.md. Tables and actions are
 * listed in kplane.p4info.json; the emulator (`kplane emulate`) implements the same behaviour.
 *
 * Structure follows the p4lang tutorials' INT exercises: headers, parser, ingress (ACL,
 * forwarding, INT source decision, sink clone), egress (INT source insert, transit push, sink
 * strip; detection and report encapsulation of the clone), deparser.
 *
 * BMv2 constraints shape it: no conditions inside actions (they live in `apply` blocks), and
 * the sink clones ingress-to-egress (I2E), because an I2E clone is re-parsed from the bytes as
 * they arrived, so the report carries the upstream INT stack while the original is stripped.
 * Tables, keys and actions carry `@name`s: p4c's P4Info (p4/build/) uses those short names,
 * and it is the schema the emulator, the intent compiler and the P4Runtime driver share.
 * Build: `make p4` (p4/README.md).
 */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  PROTO_TCP = 6;
const bit<8>  PROTO_UDP = 17;
const bit<6>  INT_DSCP = 0x17;
const bit<4>  INT_TYPE_MD = 1;
const bit<32> REPORT_MIRROR_SESSION = 500;
const bit<16> REPORT_UDP_PORT = 32766;
const bit<8>  MAX_HOPS = 16;
/* The KDN paper's INT-over-UDP (kdn-architecture-int-onos §V-A): the UDP destination port
   that announces its INT header (the original port is kept in it and restored at the sink). */
const bit<16> KDN_INT_PORT = 19268;
/* The upstream INT stack is parsed word by word up to this many words (newest first), for
   detection to read every hop; words beyond are carried opaque. Per-hop detection reads the
   first PER_HOP_MAX complete hops of them. */
#define INT_STACK_WORDS 64
#define PER_HOP_MAX 16
/* A value the instruction bitmap does not carry (its offset in a hop's words). */
const bit<8>  NOT_CARRIED = 0xFF;
/* INT-label (int-label-distributed-labeling): IP protocol of the option, and the MAX_hop the
   parser uses to tell a specific flow (INT_num > MAX_hop) from the items it carries. */
const bit<8>  INT_LABEL_PROTOCOL = 253;
const bit<8>  LABEL_MAX_HOP = 5;
/* GPINT probes (gpint-reliable-int-monitoring §III-B/C): IP protocol 254, DSCP 0x17
   measurement, 0x19 feedback, 0x21 failure notification. A switch answers a probe it has
   not seen with a feedback out of the port it came in on (clone session
   PROBE_FEEDBACK_SESSIONS + that port) and, when it forwards the probe to another switch,
   holds a clone in its SQR ring (an E2E clone to PROBE_RING_SESSION that recirculates)
   until the next switch's feedback arrives or the hold time passes; then the clone goes to
   the monitor as the failure notification. */
const bit<8>  PROBE_PROTOCOL = 254;
const bit<6>  PROBE_DSCP_MEASUREMENT = 0x17;
const bit<6>  PROBE_DSCP_FEEDBACK = 0x19;
const bit<6>  PROBE_DSCP_FAILURE = 0x21;
const bit<32> PROBE_FEEDBACK_SESSIONS = 1000;
const bit<32> PROBE_RING_SESSION = 999;
const bit<32> PROBE_RING_SLOTS = 64;
/* The loop check: a request seen again within this is a loop (µs; the emulator's too). */
const bit<48> PROBE_LOOP_WINDOW_US = 10000000;
/* A ring clone's state (meta.ring), carried across recirculations by field list 2. */
const bit<2>  RING_HELD = 1;     /* waiting for the next switch's feedback */
const bit<2>  RING_EXPIRED = 2;  /* the hold time passed: becomes the failure notification */
const bit<2>  RING_NOTICE = 3;   /* the failure notification, on its way to the monitor */

/* ------------------------------------------------------------------ headers */

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

/* INT v2.x shim for TCP/UDP (NPT 0: flagged by DSCP; the last byte keeps the original DSCP). */
header int_shim_t {
    bit<4>  int_type;
    bit<2>  npt;
    bit<2>  rsvd;
    bit<8>  len;          /* words of MD header + stack, shim excluded */
    bit<8>  rsvd2;
    bit<6>  orig_dscp;
    bit<2>  rsvd3;
}

/* INT-MD metadata header (12 bytes). */
header int_md_t {
    bit<4>  ver;
    bit<1>  d;
    bit<1>  e;
    bit<1>  m;
    bit<12> rsvd;
    bit<5>  hop_ml;
    bit<8>  remaining_hop_cnt;
    bit<16> instruction_bitmap;
    bit<16> ds_id;
    bit<16> ds_instruction;
    bit<16> ds_flags;
}

/* Per-hop metadata this switch pushes, in bitmap order (v2.x widths). */
header int_node_id_t          { bit<32> node_id; }
header int_l1_port_ids_t      { bit<16> ingress_port_id; bit<16> egress_port_id; }
header int_hop_latency_t      { bit<32> hop_latency; }
header int_q_occupancy_t      { bit<8> q_id; bit<24> q_occupancy; }
header int_ingress_tstamp_t   { bit<64> ingress_tstamp; }
header int_egress_tstamp_t    { bit<64> egress_tstamp; }
header int_l2_port_ids_t      { bit<32> ingress_port_id; bit<32> egress_port_id; }
header int_egress_tx_util_t   { bit<32> egress_port_tx_util; }

/* The KDN INT-over-UDP header after UDP, then the 2016 draft's (v0.5) INT header, then
   4-byte items (docs/wire-formats.md). */
header kdn_t {
    bit<16> orig_dst_port;
    bit<1>  o;            /* 1: a copy sent to the controller for analysis */
    bit<7>  rsvd;
    bit<8>  int_len;      /* words of INT header + stack */
}
header int_v05_md_t {
    bit<4>  ver;
    bit<2>  rep;
    bit<1>  c;
    bit<1>  e;
    bit<3>  rsvd;
    bit<5>  ins_cnt;
    bit<8>  max_hop_cnt;
    bit<8>  total_hop_cnt;
    bit<16> instruction_bitmap;
    bit<16> rsvd2;
}
/* v0.5's 4-byte timestamps and queue congestion item. */
header kdn_tstamp_t { bit<32> tstamp; }
header kdn_q_congestion_t { bit<8> q_id; bit<24> congestion; }

/* The metadata upstream hops pushed: the first INT_STACK_WORDS words one by one, the rest
   opaque. */
header int_word_t { bit<32> w; }
header int_data_t { varbit<4096> data; }

/* INT-label option after the IPv4 header: NH (the original protocol) and INT_num, then
   32-byte items, newest first (docs/wire-formats.md). */
header label_t {
    bit<8> nh;
    bit<8> int_num;
}
header label_item_t {
    bit<32> device_id;
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<64> label_time;     /* ns */
    bit<32> hop_latency;
    bit<32> queue_depth;
    bit<32> tx_utilization;
    bit<32> reserved;
}
/* The items upstream ports wrote (opaque, at most LABEL_MAX_HOP). */
header label_data_t { varbit<1280> data; }

/* A GPINT probe after IPv4: Req META (ReqID 15, type 1) and #SR; this switch's SR header
   (next port, MEA range) and the rest of the stack; #DLV, this switch's DLV on top of the
   upstream ones; #MEA, this switch's measurement on top of the upstream ones (newest first,
   docs/wire-formats.md). */
header probe_meta_t {
    bit<16> request;
    bit<16> n_sr;
}
header probe_sr_t {
    bit<8>  next_port;
    bit<16> mea_range;
}
header probe_count_t { bit<16> n; }
header probe_dlv_t {
    bit<8>  sid;
    bit<8>  q_depth;
    bit<16> n_mea;
}
header probe_mea_t { bit<32> value; }
/* Opaque parts of the stacks: SR headers after this switch's (≤ 64 × 3 bytes), upstream DLV
   headers (≤ 64 × 4), upstream measurements (≤ 256 × 4). */
header probe_rest_t { varbit<8192> data; }

/* Telemetry Report v2.0 group header (8 bytes) and one individual report. */
header report_group_t {
    bit<4>  ver;
    bit<6>  hw_id;
    bit<22> seq_no;
    bit<32> node_id;
}

header report_individual_t {
    bit<4>  rep_type;     /* 1: INT */
    bit<4>  in_type;      /* 4: IPv4 */
    bit<8>  rep_len;
    bit<8>  md_len;
    bit<1>  d;
    bit<1>  q;
    bit<1>  f;
    bit<1>  i;
    bit<4>  rsvd;
    bit<16> rep_md_bits;
    bit<16> ds_id;
    bit<16> ds_md_bits;
    bit<16> ds_md_status;
}

/* The sink's own metadata in the report (RepMdBits 0x7D00: ports, latency, queue, tstamps,
   tx utilisation). */
header report_sink_md_t {
    bit<16> ingress_port_id;
    bit<16> egress_port_id;
    bit<32> hop_latency;
    bit<8>  q_id;
    bit<24> q_occupancy;
    bit<64> ingress_tstamp;
    bit<64> egress_tstamp;
    bit<32> egress_port_tx_util;
}

struct headers_t {
    ethernet_t           report_ethernet;
    ipv4_t               report_ipv4;
    udp_t                report_udp;
    report_group_t       report_group;
    report_individual_t  report_individual;
    report_sink_md_t     report_sink_md;
    ethernet_t           ethernet;
    ipv4_t               ipv4;
    label_t              label;
    label_item_t         label_item;
    label_data_t         label_data;
    probe_meta_t         probe_meta;
    probe_sr_t           probe_sr;
    probe_rest_t         probe_sr_rest;
    probe_count_t        probe_dlv_count;
    probe_dlv_t          probe_dlv;
    probe_rest_t         probe_dlv_rest;
    probe_count_t        probe_mea_count;
    probe_mea_t          probe_mea;
    probe_rest_t         probe_mea_rest;
    udp_t                udp;
    tcp_t                tcp;
    kdn_t                kdn;
    int_v05_md_t         kdn_md;
    int_shim_t           int_shim;
    int_md_t             int_md;
    int_node_id_t        int_node_id;
    int_l1_port_ids_t    int_l1_port_ids;
    int_hop_latency_t    int_hop_latency;
    int_q_occupancy_t    int_q_occupancy;
    int_ingress_tstamp_t int_ingress_tstamp;
    kdn_tstamp_t         kdn_ingress_tstamp;
    int_egress_tstamp_t  int_egress_tstamp;
    kdn_tstamp_t         kdn_egress_tstamp;
    int_l2_port_ids_t    int_l2_port_ids;
    kdn_q_congestion_t   kdn_q_congestion;
    int_egress_tx_util_t int_egress_tx_util;
    int_word_t[INT_STACK_WORDS] int_stack;
    int_data_t           int_data;
    int_data_t           kdn_data;
}

struct metadata_t {
    /* The flow's ports and protocol (NH under an INT-label option): table keys, also on the
       sink's clone, whose metadata is reset but for field list 1. */
    @field_list(1) bit<16> l4_src;
    @field_list(1) bit<16> l4_dst;
    @field_list(1) bit<8>  l4_proto;
    /* Preserved into the sink's I2E clone (field list 1). */
    @field_list(1) bit<1> int_source;  /* this switch inserts INT (watchlist hit at the first hop) */
    @field_list(1) bit<1> kdn_source;  /* …as the KDN paper's INT-over-UDP */
    @field_list(1) bit<9> sink_port;   /* the host-facing port the original leaves on */
    /* The packet's ingress port and time (ns), which the sink's clone does not keep. */
    @field_list(1) bit<9>  in_port;
    @field_list(1) bit<64> in_ns;
    bit<1>  int_sink;         /* the egress port faces a host */
    /* INT-label, decided in ingress for the egress port and preserved into the sink's clone,
       which labels for the host-facing port and exports. */
    @field_list(1) bit<1>  label_specific;   /* a flow selected for specific-flow telemetry */
    @field_list(1) bit<8>  label_offset;     /* its INT_num start (MAX_hop) */
    @field_list(1) bit<1>  label_on;         /* the egress port labels (a label_config entry) */
    @field_list(1) bit<32> label_interval;   /* T / 2^S, ns */
    @field_list(1) bit<8>  label_max_hop;
    @field_list(1) bit<8>  label_algorithm;  /* 0 Base A, 1 Base B */
    @field_list(1) bit<8>  label_function;   /* Base B's f: 1 F1, 2 F2, 3 F3 */
    @field_list(1) bit<32> label_rest;       /* T1, ns */
    @field_list(1) bit<8>  label_items;      /* items the packet arrived with */
    bit<9>  label_port;       /* the port whose labelling this pass decides */
    bit<1>  label_now;        /* this pass labels the packet */
    bit<16> instruction_bitmap;
    bit<8>  max_hop;
    /* Sink event detection's rule (int_sink_detection, applied in ingress), preserved into
       the sink's clone, where it decides. */
    @field_list(1) bit<8>  algorithm;  /* 0 noop, 1 per-hop, 2 per-flow, 3 ewma, 4 complex */
    @field_list(1) bit<8>  measurement; /* 0 hop latency, 1 queue occupancy, 2 tx utilisation */
    @field_list(1) bit<32> threshold;
    /* complex: literal j's measurement, test (0 none, 1 >, 2 <, 3 rose by >) and bound */
    @field_list(1) bit<8> lit_m0; @field_list(1) bit<8> lit_op0; @field_list(1) bit<32> lit_t0;
    @field_list(1) bit<8> lit_m1; @field_list(1) bit<8> lit_op1; @field_list(1) bit<32> lit_t1;
    @field_list(1) bit<8> lit_m2; @field_list(1) bit<8> lit_op2; @field_list(1) bit<32> lit_t2;
    @field_list(1) bit<8> lit_m3; @field_list(1) bit<8> lit_op3; @field_list(1) bit<32> lit_t3;
    @field_list(1) bit<8> weight_q8;
    /* The upstream stack is parsed word by word only when a sink's rule reads it: the first
       pass resubmits the packet with this set (field list 4). Transit and plain sinks carry
       it opaque. */
    @field_list(4) bit<1> parse_words;
    /* The upstream stack as the parser read it: words left and parsed, words per hop, and
       where each value detection reads sits in a hop (NOT_CARRIED: absent); preserved into
       the sink's clone (field list 1). Then, at the sink, per measurement the sum and the
       largest value over the hops. */
    bit<16> stack_left;
    @field_list(1) bit<8>  stack_parsed;
    @field_list(1) bit<8>  hop_words;
    @field_list(1) bit<1>  has_node;
    @field_list(1) bit<8>  off_lat;
    @field_list(1) bit<8>  off_q;
    @field_list(1) bit<8>  off_tx;
    bit<64> sum_lat; bit<64> sum_q; bit<64> sum_tx;
    bit<32> max_lat; bit<32> max_q; bit<32> max_tx;
    /* The watched measurement: where it sits in a hop and the mask of its value. */
    bit<8>  m_off;
    bit<32> m_mask;
    bit<32> tx_scale;         /* tx utilisation per byte of a window (‰, 16 fractional bits) */
    bit<32> tx_util;          /* this packet's egress port, its previous window (‰) */
    bit<1>  report;           /* sink event detection says: report */
    bit<32> hop_latency;
    bit<16> ecmp_base;
    bit<16> ecmp_select;
    /* Set by the control plane's config tables (switch_config, probe_config) each pass. */
    bit<32> switch_id;
    bit<32> switch_ip;
    bit<32> collector_ip;
    bit<48> collector_mac;
    bit<32> probe_hold_us;    /* SQR: how long a clone is held for the next feedback (t_f) */
    bit<1>  probe_recovery;   /* SQR's recovery mode: answer probes with feedback */
    bit<9>  probe_monitor_port; /* SQR: where failure notifications leave */
    bit<8>  words;            /* words this hop pushes */
    bit<16> inner_words;      /* words of the packet a report carries */
    bit<16> md_words;         /* words of the sink's own metadata in a report (0 or 8) */
    bit<64> label_ct;         /* INT-label: the labelling time, ns */
    /* GPINT's SQR ring: this probe is protected (a clone is held once it leaves); a clone's
       state, when it was taken (µs) and whether it holds a slot, kept across its
       recirculations. */
    @field_list(3) bit<1>  ring_protect;
    @field_list(2) bit<2>  ring;
    @field_list(2) bit<48> ring_since;
    @field_list(2) bit<1>  ring_slot;
    /* A probe asking for port counters (request type 1) takes one pass per port of its SR
       header's MEA range (first port: high byte, last: low byte), last port first, so the
       first port ends on top; later passes are recirculations (field list 3). */
    @field_list(3) bit<1>  mea_pass;    /* a later pass: forwarding and checks are done */
    @field_list(3) bit<8>  mea_port;    /* the port whose counter this pass pushes */
    bit<32> mea_value;                  /* that counter (ingress reads it, egress pushes it) */
}

/* ------------------------------------------------------------------ parser */

parser KplaneParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        meta.l4_proto = hdr.ipv4.protocol;
        transition select(hdr.ipv4.protocol) {
            PROTO_UDP: parse_udp;
            PROTO_TCP: parse_tcp;
            INT_LABEL_PROTOCOL: parse_label;
            PROBE_PROTOCOL: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        pkt.extract(hdr.probe_meta);
        transition select(hdr.probe_meta.n_sr) {
            0: parse_probe_stacks;
            default: parse_probe_sr;
        }
    }
    state parse_probe_sr {
        pkt.extract(hdr.probe_sr);
        pkt.extract(hdr.probe_sr_rest, (bit<32>)(hdr.probe_meta.n_sr - 1) * 24);
        transition parse_probe_stacks;
    }
    state parse_probe_stacks {
        pkt.extract(hdr.probe_dlv_count);
        pkt.extract(hdr.probe_dlv_rest, (bit<32>)hdr.probe_dlv_count.n * 32);
        pkt.extract(hdr.probe_mea_count);
        pkt.extract(hdr.probe_mea_rest, (bit<32>)hdr.probe_mea_count.n * 32);
        transition accept;
    }
    state parse_label {
        pkt.extract(hdr.label);
        meta.l4_proto = hdr.label.nh;
        transition select(hdr.label.int_num) {
            0 .. LABEL_MAX_HOP: label_items;
            default: label_specific_items;
        }
    }
    state label_items {
        meta.label_items = hdr.label.int_num;
        transition parse_label_data;
    }
    state label_specific_items {
        meta.label_items = hdr.label.int_num - LABEL_MAX_HOP;
        transition parse_label_data;
    }
    state parse_label_data {
        pkt.extract(hdr.label_data, (bit<32>)meta.label_items * 256);
        transition select(hdr.label.nh) {
            PROTO_UDP: parse_udp;
            PROTO_TCP: parse_tcp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        meta.l4_src = hdr.udp.src_port;
        meta.l4_dst = hdr.udp.dst_port;
        transition select(hdr.ipv4.dscp, hdr.udp.dst_port) {
            (INT_DSCP, _): parse_int;
            (_, KDN_INT_PORT): parse_kdn;
            default: accept;
        }
    }
    state parse_kdn {
        pkt.extract(hdr.kdn);
        pkt.extract(hdr.kdn_md);
        meta.l4_dst = hdr.kdn.orig_dst_port;
        /* Stack bytes = (INT len - 2 header words) * 4. */
        pkt.extract(hdr.kdn_data, (bit<32>)(((bit<16>)hdr.kdn.int_len - 2) * 32));
        transition accept;
    }
    state parse_tcp {
        pkt.extract(hdr.tcp);
        meta.l4_src = hdr.tcp.src_port;
        meta.l4_dst = hdr.tcp.dst_port;
        transition select(hdr.ipv4.dscp) {
            INT_DSCP: parse_int;
            default: accept;
        }
    }
    state parse_int {
        pkt.extract(hdr.int_shim);
        pkt.extract(hdr.int_md);
        /* Stack words = shim.len - 3 header words; where detection's values sit in a hop
           follows from the instruction bitmap (INT v2.x order and widths). */
        meta.stack_left = (bit<16>)hdr.int_shim.len - 3;
        meta.hop_words = (bit<8>)hdr.int_md.hop_ml;
        bit<16> b = hdr.int_md.instruction_bitmap;
        meta.has_node = b[15:15];
        bit<8> lat = (bit<8>)b[15:15] + (bit<8>)b[14:14];
        bit<8> q = lat + (bit<8>)b[13:13];
        bit<8> tx = q + (bit<8>)b[12:12] + 2 * ((bit<8>)b[11:11] + (bit<8>)b[10:10] + (bit<8>)b[9:9]);
        meta.off_lat = NOT_CARRIED;
        meta.off_q = NOT_CARRIED;
        meta.off_tx = NOT_CARRIED;
        if (b[13:13] == 1) { meta.off_lat = lat; }
        if (b[12:12] == 1) { meta.off_q = q; }
        if (b[8:8] == 1) { meta.off_tx = tx; }
        transition select(meta.parse_words, meta.stack_left) {
            (_, 0): accept;
            (0, _): parse_int_rest;
            default: parse_int_word;
        }
    }
    /* One word of the upstream stack (detection reads them in egress, at the sink). */
    state parse_int_word {
        pkt.extract(hdr.int_stack.next);
        meta.stack_left = meta.stack_left - 1;
        meta.stack_parsed = meta.stack_parsed + 1;
        transition select(meta.stack_left, meta.stack_parsed) {
            (0, _): accept;
            (_, INT_STACK_WORDS): parse_int_rest;
            default: parse_int_word;
        }
    }
    state parse_int_rest {
        pkt.extract(hdr.int_data, (bit<32>)meta.stack_left * 32);
        transition accept;
    }
}

control KplaneVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

/* ------------------------------------------------------------------ ingress */

control KplaneIngress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t std) {
    /* ECMP state written by the routing agent: per destination host index, a base into
       `ecmp_ports` and a member count. */
    register<bit<16>>(1024) ecmp_base;
    register<bit<16>>(1024) ecmp_count;
    register<bit<9>>(16384) ecmp_ports;
    /* GPINT: when each request was last seen (the loop check: seen within
       PROBE_LOOP_WINDOW_US, so 15-bit ids can be reused). */
    register<bit<48>>(32768) probe_seen;  /* µs + 1 when last seen; 0 never */
    /* SQR's ring: the next switch's feedback arrived (by request), clones held. */
    register<bit<1>>(32768) probe_fed;
    register<bit<32>>(1) probe_ring_used;
    /* Packets received per port (what a port-counter probe measures). */
    register<bit<32>>(512) port_rx;

    @name(".drop") action drop() { mark_to_drop(std); }
    @name(".set_egress") action set_egress(bit<9> port) { std.egress_spec = port; }
    @name(".ecmp") action ecmp() {
        bit<16> count;
        bit<32> host = (bit<32>)hdr.ipv4.dst_addr[9:0];
        ecmp_base.read(meta.ecmp_base, host);
        ecmp_count.read(count, host);
        hash(meta.ecmp_select, HashAlgorithm.crc16, (bit<16>)0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, meta.l4_proto, meta.l4_src, meta.l4_dst },
             (bit<32>)count);
        bit<9> port;
        ecmp_ports.read(port, (bit<32>)(meta.ecmp_base + meta.ecmp_select));
        std.egress_spec = port;
    }
    @name(".acl_drop") action acl_drop() { mark_to_drop(std); }
    @name(".int_source") action int_source(bit<16> instruction_bitmap, bit<8> max_hop) {
        meta.int_source = 1;
        meta.instruction_bitmap = instruction_bitmap;
        meta.max_hop = max_hop;
    }
    /* The KDN paper's INT-over-UDP instead of INT-MD (UDP flows; v0.5 items, 4 bytes each). */
    @name(".int_source_kdn") action int_source_kdn(bit<16> instruction_bitmap, bit<8> max_hop) {
        meta.int_source = 1;
        meta.kdn_source = 1;
        meta.instruction_bitmap = instruction_bitmap;
        meta.max_hop = max_hop;
    }

    /* INT-label specific-flow telemetry: the flow's packets start with INT_num = MAX_hop, so
       every labelling port labels them. */
    @name(".int_label_specific") action int_label_specific(bit<8> max_hop) {
        meta.label_specific = 1;
        meta.label_offset = max_hop;
    }

    /* INT-label, per egress port: Base A / Base B and their parameters (label_config), and
       Pro's S (label_frequency: the interval becomes T / 2^S), read here for the port the
       packet will leave on; egress decides with the port's last labelling time (Reg1). */
    @name(".set_labelling") action set_labelling(bit<32> interval_ns, bit<8> max_hop, bit<8> algorithm,
                                                 bit<8> function, bit<32> rest_ns) {
        meta.label_on = 1;
        meta.label_interval = interval_ns;
        meta.label_max_hop = max_hop;
        meta.label_algorithm = algorithm;
        meta.label_function = function;
        meta.label_rest = rest_ns;
    }
    @name(".set_label_shift") action set_label_shift(bit<8> shift) {
        meta.label_interval = meta.label_interval >> shift;
    }
    /* Configuration the control plane writes over P4Runtime (BMv2's P4Runtime server
       cannot write registers): which ports face hosts (this switch is their INT sink), and
       SQR's recovery mode and the port towards the monitor (the default action). */
    @name(".host_facing") action host_facing() { meta.int_sink = 1; }
    @name(".sink_ports") table sink_ports {
        key = { std.egress_spec: exact @name("egress_port"); }
        actions = { host_facing; @defaultonly NoAction; }
        default_action = NoAction();
        size = 512;
    }
    @name(".set_probe_config") action set_probe_config(bit<1> recovery, bit<9> monitor_port) {
        meta.probe_recovery = recovery;
        meta.probe_monitor_port = monitor_port;
    }
    @name(".probe_config") table probe_config {
        actions = { set_probe_config; NoAction; }
        default_action = NoAction();
    }

    @name(".label_config") table label_config {
        key = { std.egress_spec: exact @name("egress_port"); }
        actions = { set_labelling; @defaultonly NoAction; }
        default_action = NoAction();
        size = 64;
    }
    @name(".label_frequency") table label_frequency {
        key = { std.egress_spec: exact @name("egress_port"); }
        actions = { set_label_shift; @defaultonly NoAction; }
        default_action = NoAction();
        size = 64;
    }

    @name(".drop_acl") table drop_acl {
        key = {
            hdr.ipv4.src_addr: ternary @name("src_addr");
            hdr.ipv4.dst_addr: ternary @name("dst_addr");
            meta.l4_proto: ternary @name("protocol");
            meta.l4_src: range @name("src_port");
            meta.l4_dst: range @name("dst_port");
        }
        actions = { acl_drop; @defaultonly NoAction; }
        default_action = NoAction();
        size = 256;
    }

    @name(".ipv4_forward") table ipv4_forward {
        key = { hdr.ipv4.dst_addr: lpm @name("dst_addr"); }
        actions = { set_egress; drop; ecmp; }
        default_action = ecmp();
        size = 1024;
    }

    @name(".int_watchlist") table int_watchlist {
        key = {
            hdr.ipv4.src_addr: ternary @name("src_addr");
            hdr.ipv4.dst_addr: ternary @name("dst_addr");
            meta.l4_proto: ternary @name("protocol");
            meta.l4_src: range @name("src_port");
            meta.l4_dst: range @name("dst_port");
        }
        actions = { int_source; int_source_kdn; int_label_specific; @defaultonly NoAction; }
        default_action = NoAction();
        size = 256;
    }

    @name(".detect_noop") action detect_noop() { meta.algorithm = 0; }
    @name(".detect_per_hop") action detect_per_hop(bit<8> measurement, bit<32> threshold) {
        meta.algorithm = 1; meta.measurement = measurement; meta.threshold = threshold;
    }
    @name(".detect_per_flow") action detect_per_flow(bit<8> measurement, bit<32> threshold) {
        meta.algorithm = 2; meta.measurement = measurement; meta.threshold = threshold;
    }
    @name(".detect_ewma") action detect_ewma(bit<8> measurement, bit<32> threshold, bit<8> weight_q8) {
        meta.algorithm = 3; meta.measurement = measurement; meta.threshold = threshold;
        meta.weight_q8 = weight_q8;
    }
    /* Complex detection: a conjunction of up to four literals "m op t" (op 0: no literal,
       1: above, 2: below, 3: risen by more than t since the flow's previous packet) on the
       largest value of m over the hops; a report while it holds. */
    @name(".detect_complex") action detect_complex(
            bit<8> measurement, bit<8> op, bit<32> threshold,
            bit<8> measurement1, bit<8> op1, bit<32> threshold1,
            bit<8> measurement2, bit<8> op2, bit<32> threshold2,
            bit<8> measurement3, bit<8> op3, bit<32> threshold3) {
        meta.algorithm = 4;
        meta.lit_m0 = measurement; meta.lit_op0 = op; meta.lit_t0 = threshold;
        meta.lit_m1 = measurement1; meta.lit_op1 = op1; meta.lit_t1 = threshold1;
        meta.lit_m2 = measurement2; meta.lit_op2 = op2; meta.lit_t2 = threshold2;
        meta.lit_m3 = measurement3; meta.lit_op3 = op3; meta.lit_t3 = threshold3;
    }
    @name(".int_sink_detection") table int_sink_detection {
        key = {
            hdr.ipv4.src_addr: ternary @name("src_addr");
            hdr.ipv4.dst_addr: ternary @name("dst_addr");
            meta.l4_proto: ternary @name("protocol");
            meta.l4_src: range @name("src_port");
            meta.l4_dst: range @name("dst_port");
        }
        actions = { detect_per_hop; detect_per_flow; detect_ewma; detect_complex; detect_noop; }
        default_action = detect_noop();
        size = 256;
    }

    apply {
        probe_config.apply();
        if (meta.ring == 0 && meta.mea_pass == 0 && meta.parse_words == 0) {
            bit<32> rx;
            port_rx.read(rx, (bit<32>)std.ingress_port);
            port_rx.write((bit<32>)std.ingress_port, rx + 1);
        }
        if (!hdr.ipv4.isValid()) { return; }
        /* A port-counter probe back for its next pass: the counter, the same next hop. */
        if (meta.mea_pass == 1) {
            port_rx.read(meta.mea_value, (bit<32>)meta.mea_port);
            std.egress_spec = (bit<9>)hdr.probe_sr.next_port;
            return;
        }
        /* A held clone back from egress (SQR's ring): released by its feedback, sent to
           the monitor once egress found the hold time over, or around again. It takes its
           slot on its first time here, so a probe lost before its clone was made (a queue
           drop, no clone session) holds none. */
        if (meta.ring != 0) {
            bit<32> request = (bit<32>)(hdr.probe_meta.request >> 1);
            bit<1> fed;
            probe_fed.read(fed, request);
            bit<32> used;
            probe_ring_used.read(used, 0);
            if (meta.ring_slot == 0) {
                meta.ring_slot = 1;
                used = used + 1;
            }
            std.egress_spec = meta.probe_monitor_port;
            if (fed == 1) {
                used = used - 1;
                drop();
            } else if (meta.ring == RING_EXPIRED) {
                used = used - 1;
                hdr.ipv4.dscp = PROBE_DSCP_FAILURE;
                meta.ring = RING_NOTICE;
            }
            probe_ring_used.write(0, used);
            return;
        }
        meta.in_port = std.ingress_port;
        /* BMv2's clock counts µs; kplane's formats count ns. */
        meta.in_ns = (bit<64>)std.ingress_global_timestamp * 1000;
        if (hdr.ipv4.ttl <= 1) { drop(); return; }
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        /* A GPINT probe goes where its SR header says. One this switch has not seen (the
           loop check) is answered with a feedback (an I2E clone, back out of its ingress
           port) and, when it goes on to another switch and the ring has room, protected by
           a held clone. A feedback from the next switch releases the clone it protects. */
        if (hdr.probe_meta.isValid()) {
            bit<32> request = (bit<32>)(hdr.probe_meta.request >> 1);
            if (hdr.ipv4.dscp == PROBE_DSCP_FEEDBACK) {
                probe_fed.write(request, 1);
                drop();
                return;
            }
            if (hdr.ipv4.dscp != PROBE_DSCP_MEASUREMENT || !hdr.probe_sr.isValid()) {
                drop();
                return;
            }
            std.egress_spec = (bit<9>)hdr.probe_sr.next_port;
            if (hdr.probe_meta.request[0:0] == 1) {
                meta.mea_port = hdr.probe_sr.mea_range[7:0];
                port_rx.read(meta.mea_value, (bit<32>)meta.mea_port);
            }
            bit<48> last_seen;
            probe_seen.read(last_seen, request);
            probe_seen.write(request, std.ingress_global_timestamp + 1);
            bool seen = last_seen != 0
                && std.ingress_global_timestamp + 1 - last_seen < PROBE_LOOP_WINDOW_US;
            if (!seen && meta.probe_recovery == 1) {
                clone(CloneType.I2E, PROBE_FEEDBACK_SESSIONS + (bit<32>)std.ingress_port);
                bit<32> used;
                probe_ring_used.read(used, 0);
                /* #SR 1: this switch's header is the last, the probe goes to the monitor. */
                if (hdr.probe_meta.n_sr > 1 && used < PROBE_RING_SLOTS) {
                    probe_fed.write(request, 0);
                    meta.ring_protect = 1;
                }
            }
            return;
        }
        if (drop_acl.apply().hit) { return; }
        ipv4_forward.apply();
        /* INT source: the first switch of a watched flow (no INT header yet). */
        if (!hdr.int_shim.isValid() && !hdr.kdn.isValid()) {
            int_watchlist.apply();
        }
        if (label_config.apply().hit) {
            label_frequency.apply();
        }
        /* INT sink: the packet leaves towards a host. Its I2E clone becomes the report: INT's,
           or INT-label's export (the clone labels for the host-facing port, then exports). */
        sink_ports.apply();
        if (meta.int_sink == 1 && (hdr.int_shim.isValid() || hdr.kdn.isValid()
                                   || meta.int_source == 1)) {
            int_sink_detection.apply();
            /* A rule that reads the upstream hops: once more, with the stack parsed. */
            if (hdr.int_shim.isValid() && meta.algorithm != 0 && meta.parse_words == 0) {
                meta.parse_words = 1;
                resubmit_preserving_field_list(4);
                return;
            }
        }
        if (meta.int_sink == 1 && (hdr.int_shim.isValid() || hdr.kdn.isValid()
                                   || meta.int_source == 1
                                   || hdr.label.isValid() || meta.label_on == 1)) {
            meta.sink_port = std.egress_spec;
            clone_preserving_field_list(CloneType.I2E, REPORT_MIRROR_SESSION, 1);
        }
    }
}

/* ------------------------------------------------------------------ egress */

/* Sink detection, written out per hop and per literal (P4 has no loops). */

/* Per-hop detection of one hop (`node`, value `v`): a first value, or one more than the
   threshold away from the last value reported for the node, is reported and becomes the
   node's last. */
#define PER_HOP_CHECK(node, v) { \
        bit<32> hop_slot = ((node) & 0xFF) | ((bit<32>)meta.measurement << 8); \
        bit<32> last; \
        bit<1> seen; \
        per_hop_last.read(last, hop_slot); \
        per_hop_seen.read(seen, hop_slot); \
        if (seen == 0 || (bit<64>)(v) > (bit<64>)last + (bit<64>)meta.threshold \
                || (bit<64>)last > (bit<64>)(v) + (bit<64>)meta.threshold) { \
            meta.report = 1; \
            per_hop_last.write(hop_slot, (v)); \
            per_hop_seen.write(hop_slot, 1); \
        } \
    }

/* Whether upstream hop I (newest first) lies whole in the parsed words. */
#define HOP_PARSED(I) (meta.hop_words != 0 && (bit<16>)meta.stack_parsed >= (bit<16>)(I + 1) * (bit<16>)meta.hop_words)

/* Upstream hop I's values into the sums and largest values (0 where not carried). */
#define HOP_TOTALS(I) \
    if (HOP_PARSED(I)) { \
        bit<8> base = I * meta.hop_words; \
        bit<32> lat = 0; \
        bit<32> q = 0; \
        bit<32> tx = 0; \
        if (meta.off_lat != NOT_CARRIED) { lat = hdr.int_stack[base + meta.off_lat].w; } \
        if (meta.off_q != NOT_CARRIED) { q = hdr.int_stack[base + meta.off_q].w & 0xFFFFFF; } \
        if (meta.off_tx != NOT_CARRIED) { tx = hdr.int_stack[base + meta.off_tx].w; } \
        meta.sum_lat = meta.sum_lat + (bit<64>)lat; \
        meta.sum_q = meta.sum_q + (bit<64>)q; \
        meta.sum_tx = meta.sum_tx + (bit<64>)tx; \
        if (lat > meta.max_lat) { meta.max_lat = lat; } \
        if (q > meta.max_q) { meta.max_q = q; } \
        if (tx > meta.max_tx) { meta.max_tx = tx; } \
    }

/* Upstream hop I (newest first): its node id (0 when the bitmap carries none) and the
   watched value (0 when not carried), read from the parsed stack. */
#define PER_HOP_UPSTREAM(I) \
    if (HOP_PARSED(I)) { \
        bit<8> base = I * meta.hop_words; \
        bit<32> node = 0; \
        if (meta.has_node == 1) { node = hdr.int_stack[base].w; } \
        bit<32> v = 0; \
        if (meta.m_off != NOT_CARRIED) { v = hdr.int_stack[base + meta.m_off].w & meta.m_mask; } \
        PER_HOP_CHECK(node, v) \
    }

/* Complex literal J: the largest value of its measurement over the hops against its bound,
   or its rise since the flow's previous packet (complex_last, slot × 4 + J). */
#define LITERAL(J) { \
        bit<32> x = meta.max_lat; \
        if (meta.lit_m##J == 1) { x = meta.max_q; } \
        if (meta.lit_m##J == 2) { x = meta.max_tx; } \
        bit<32> at = ((bit<32>)slot << 2) + J; \
        bit<32> prev; \
        complex_last.read(prev, at); \
        complex_last.write(at, x); \
        bit<32> rise = 0; \
        if (x > prev) { rise = x - prev; } \
        if (meta.lit_op##J == 1 && !(x > meta.lit_t##J)) { meta.report = 0; } \
        if (meta.lit_op##J == 2 && !(x < meta.lit_t##J)) { meta.report = 0; } \
        if (meta.lit_op##J == 3 && !(rise > meta.lit_t##J)) { meta.report = 0; } \
    }

control KplaneEgress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t std) {
    /* The report sequence number per hw_id. */
    register<bit<22>>(64) report_seq;
    /* GPINT: probes this switch forwarded (its rule-hit counter, what a probe measures). */
    register<bit<32>>(1) probe_hits;

    /* This switch's identity and where its reports go (the control plane sets the default
       action over P4Runtime): INT node id, report source address, the collector's IPv4 and
       next-hop MAC, SQR's hold time in µs (t_f), and the link rate as tx utilisation per
       byte of a 128 µs window (‰, 16 fractional bits: kplane_p4::tx_util::scale_q16). */
    @name(".set_switch") action set_switch(bit<32> switch_id, bit<32> switch_ip,
                                           bit<32> collector_ip, bit<48> collector_mac,
                                           bit<32> probe_hold_us, bit<32> tx_scale) {
        meta.switch_id = switch_id;
        meta.switch_ip = switch_ip;
        meta.collector_ip = collector_ip;
        meta.collector_mac = collector_mac;
        meta.probe_hold_us = probe_hold_us;
        meta.tx_scale = tx_scale;
    }
    @name(".switch_config") table switch_config {
        actions = { set_switch; NoAction; }
        default_action = NoAction();
    }
    /* Sink event detection state: the last value reported per (node id mod 256,
       measurement), the last sum and the EWMA per flow slot (a hash of the 5-tuple and the
       measurement), each complex literal's value at the flow's previous packet (slot × 4 +
       literal). A `seen` bit tells a first packet, which is always reported. Whatever the
       rule, a flow's first packet under a rule is reported too: `flow_owner` holds which
       flow (a CRC-32 of its 5-tuple, never 0) last passed through its slot (a CRC-16 of the
       5-tuple) under a rule, and a flow its slot does not hold is new — so no rule hides a
       new flow from the collector. */
    register<bit<32>>(4096) flow_owner;
    register<bit<32>>(1024) per_hop_last;
    register<bit<1>>(1024) per_hop_seen;
    register<bit<64>>(4096) per_flow_last;
    register<bit<1>>(4096) per_flow_seen;
    register<bit<64>>(4096) ewma_avg;        /* fixed point, 8 fractional bits */
    register<bit<64>>(4096) ewma_reported;
    register<bit<1>>(4096) ewma_seen;
    register<bit<32>>(16384) complex_last;
    /* Egress tx utilisation per port (kplane_p4::tx_util): the current 128 µs window, the
       bytes sent in it, and the previous window's utilisation (‰). */
    register<bit<48>>(512) tx_tick;
    register<bit<64>>(512) tx_bytes;
    register<bit<32>>(512) tx_util;
    /* INT-label, per egress port: the last labelling time in ns (Reg1; 0: never). */
    register<bit<64>>(512) label_last;


    /* Inserts the shim and MD header at the source. */
    action int_insert() {
        hdr.int_shim.setValid();
        hdr.int_shim.int_type = INT_TYPE_MD;
        hdr.int_shim.npt = 0;
        hdr.int_shim.len = 3;
        hdr.int_shim.orig_dscp = hdr.ipv4.dscp;
        hdr.int_md.setValid();
        hdr.int_md.ver = 2;
        hdr.int_md.hop_ml = 0;
        hdr.int_md.remaining_hop_cnt = meta.max_hop;
        hdr.int_md.instruction_bitmap = meta.instruction_bitmap;
        hdr.ipv4.dscp = INT_DSCP;
        hdr.ipv4.total_len = hdr.ipv4.total_len + 16;
        hdr.udp.length = hdr.udp.length + 16;   /* a no-op write when UDP is invalid */
    }

    /* KDN's source: the UDP destination port becomes the INT port (the original kept in the
       KDN header), then the v0.5 INT header with no items yet. */
    action kdn_insert(bit<5> ins_cnt) {
        hdr.kdn.setValid();
        hdr.kdn.orig_dst_port = hdr.udp.dst_port;
        hdr.kdn.o = 0;
        hdr.kdn.int_len = 2;
        hdr.udp.dst_port = KDN_INT_PORT;
        hdr.kdn_md.setValid();
        hdr.kdn_md.ver = 0;
        hdr.kdn_md.ins_cnt = ins_cnt;
        hdr.kdn_md.max_hop_cnt = meta.max_hop;
        hdr.kdn_md.total_hop_cnt = 0;
        hdr.kdn_md.instruction_bitmap = meta.instruction_bitmap & 0xFF00;
        hdr.ipv4.total_len = hdr.ipv4.total_len + 12;
        hdr.udp.length = hdr.udp.length + 12;
    }
    action push_kdn_ingress_tstamp() {
        hdr.kdn_ingress_tstamp.setValid();
        hdr.kdn_ingress_tstamp.tstamp = (bit<32>)meta.in_ns;
        meta.words = meta.words + 1;
    }
    action push_kdn_egress_tstamp() {
        hdr.kdn_egress_tstamp.setValid();
        hdr.kdn_egress_tstamp.tstamp = (bit<32>)((bit<64>)std.egress_global_timestamp * 1000);
        meta.words = meta.words + 1;
    }
    action push_kdn_q_congestion() {
        /* BMv2 reports no congestion state. */
        hdr.kdn_q_congestion.setValid();
        hdr.kdn_q_congestion.q_id = 0;
        hdr.kdn_q_congestion.congestion = 0;
        meta.words = meta.words + 1;
    }
    /* The KDN lengths after this hop's push. */
    action kdn_push_done() {
        hdr.kdn_md.total_hop_cnt = hdr.kdn_md.total_hop_cnt + 1;
        hdr.kdn.int_len = hdr.kdn.int_len + meta.words;
        hdr.ipv4.total_len = hdr.ipv4.total_len + ((bit<16>)meta.words << 2);
        hdr.udp.length = hdr.udp.length + ((bit<16>)meta.words << 2);
    }
    /* The KDN sink gives the host its packet back: original port, no INT. */
    action kdn_strip() {
        hdr.udp.dst_port = hdr.kdn.orig_dst_port;
        bit<16> bytes = ((bit<16>)hdr.kdn.int_len << 2) + 4;
        hdr.ipv4.total_len = hdr.ipv4.total_len - bytes;
        hdr.udp.length = hdr.udp.length - bytes;
        hdr.kdn.setInvalid();
        hdr.kdn_md.setInvalid();
        hdr.kdn_data.setInvalid();
    }

    /* This hop's metadata, one action per instruction bit (BMv2 allows no conditions inside
       actions, so `apply` chooses them). */
    action push_node_id() {
        hdr.int_node_id.setValid(); hdr.int_node_id.node_id = meta.switch_id;
        meta.words = meta.words + 1;
    }
    action push_l1_port_ids() {
        hdr.int_l1_port_ids.setValid();
        hdr.int_l1_port_ids.ingress_port_id = (bit<16>)meta.in_port;
        hdr.int_l1_port_ids.egress_port_id = (bit<16>)std.egress_port;
        meta.words = meta.words + 1;
    }
    action push_hop_latency() {
        hdr.int_hop_latency.setValid();
        hdr.int_hop_latency.hop_latency = meta.hop_latency;
        meta.words = meta.words + 1;
    }
    action push_q_occupancy() {
        hdr.int_q_occupancy.setValid();
        hdr.int_q_occupancy.q_id = 0;
        hdr.int_q_occupancy.q_occupancy = (bit<24>)std.enq_qdepth;
        meta.words = meta.words + 1;
    }
    action push_ingress_tstamp() {
        hdr.int_ingress_tstamp.setValid();
        hdr.int_ingress_tstamp.ingress_tstamp = meta.in_ns;
        meta.words = meta.words + 2;
    }
    action push_egress_tstamp() {
        hdr.int_egress_tstamp.setValid();
        hdr.int_egress_tstamp.egress_tstamp = (bit<64>)std.egress_global_timestamp * 1000;
        meta.words = meta.words + 2;
    }
    action push_l2_port_ids() {
        hdr.int_l2_port_ids.setValid();
        hdr.int_l2_port_ids.ingress_port_id = (bit<32>)meta.in_port;
        hdr.int_l2_port_ids.egress_port_id = (bit<32>)std.egress_port;
        meta.words = meta.words + 2;
    }
    action push_egress_tx_util() {
        hdr.int_egress_tx_util.setValid();
        hdr.int_egress_tx_util.egress_port_tx_util = meta.tx_util;
        meta.words = meta.words + 1;
    }
    /* The MD header and lengths after this hop's push. */
    action push_done() {
        hdr.int_md.hop_ml = (bit<5>)meta.words;
        hdr.int_md.remaining_hop_cnt = hdr.int_md.remaining_hop_cnt - 1;
        hdr.int_shim.len = hdr.int_shim.len + meta.words;
        hdr.ipv4.total_len = hdr.ipv4.total_len + ((bit<16>)meta.words << 2);
        hdr.udp.length = hdr.udp.length + ((bit<16>)meta.words << 2);
    }

    /* Removes INT before the packet reaches the host. */
    action int_strip() {
        hdr.ipv4.dscp = hdr.int_shim.orig_dscp;
        bit<16> bytes = ((bit<16>)hdr.int_shim.len << 2) + 4;
        hdr.ipv4.total_len = hdr.ipv4.total_len - bytes;
        hdr.udp.length = hdr.udp.length - bytes;
        hdr.int_shim.setInvalid();
        hdr.int_md.setInvalid();
        hdr.int_data.setInvalid();
        hdr.int_node_id.setInvalid();
        hdr.int_l1_port_ids.setInvalid();
        hdr.int_hop_latency.setInvalid();
        hdr.int_q_occupancy.setInvalid();
        hdr.int_ingress_tstamp.setInvalid();
        hdr.int_egress_tstamp.setInvalid();
        hdr.int_l2_port_ids.setInvalid();
        hdr.int_egress_tx_util.setInvalid();
        hdr.int_stack.pop_front(INT_STACK_WORDS);
    }

    /* Wraps the (E2E-cloned) packet in Ethernet/IPv4/UDP + Telemetry Report v2.0. */
    action report_encap() {
        bit<22> seq;
        report_seq.read(seq, 0);
        report_seq.write(0, seq + 1);
        hdr.report_ethernet.setValid();
        hdr.report_ethernet.dst_addr = meta.collector_mac;
        hdr.report_ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.report_ipv4.setValid();
        hdr.report_ipv4.version = 4;
        hdr.report_ipv4.ihl = 5;
        hdr.report_ipv4.ttl = 64;
        hdr.report_ipv4.protocol = PROTO_UDP;
        hdr.report_ipv4.src_addr = meta.switch_ip;
        hdr.report_ipv4.dst_addr = meta.collector_ip;
        hdr.report_udp.setValid();
        hdr.report_udp.src_port = REPORT_UDP_PORT;
        hdr.report_udp.dst_port = REPORT_UDP_PORT;
        hdr.report_group.setValid();
        hdr.report_group.ver = 2;
        hdr.report_group.hw_id = 0;
        hdr.report_group.seq_no = seq;
        hdr.report_group.node_id = meta.switch_id;
        hdr.report_individual.setValid();
        hdr.report_individual.rep_type = 1;
        hdr.report_individual.in_type = 4;
        hdr.report_individual.md_len = (bit<8>)meta.md_words;
        hdr.report_individual.f = 1;
        /* Report Length (words after the first): 2 fixed + the MD + the inner IPv4 packet in
           whole words, at most 244 (the packet is cut to match, below). */
        hdr.report_individual.rep_len = (bit<8>)(2 + meta.md_words + meta.inner_words);
        /* The report starts at the inner IPv4 header: the inner Ethernet header goes. */
        hdr.ethernet.setInvalid();
        hdr.report_udp.length = 8 + 8 + 12 + (meta.md_words << 2) + (meta.inner_words << 2);
        hdr.report_ipv4.total_len = 20 + hdr.report_udp.length;
        truncate((bit<32>)(14 + hdr.report_ipv4.total_len));
    }

    /* An INT report's sink metadata (RepMdBits 0x7D00, 8 words). */
    action report_sink_metadata() {
        hdr.report_individual.rep_md_bits = 0x7D00;
        hdr.report_sink_md.setValid();
        hdr.report_sink_md.ingress_port_id = (bit<16>)meta.in_port;
        hdr.report_sink_md.egress_port_id = (bit<16>)meta.sink_port;
        hdr.report_sink_md.hop_latency = meta.hop_latency;
        hdr.report_sink_md.q_occupancy = (bit<24>)std.enq_qdepth;
        hdr.report_sink_md.ingress_tstamp = meta.in_ns;
        hdr.report_sink_md.egress_tstamp = (bit<64>)std.egress_global_timestamp * 1000;
        hdr.report_sink_md.egress_port_tx_util = meta.tx_util;
    }

    /* INT-label: the option (NH, INT_num) on a packet that carries none; a specific flow's
       INT_num starts at MAX_hop. */
    action label_open() {
        hdr.label.setValid();
        hdr.label.nh = hdr.ipv4.protocol;
        hdr.label.int_num = meta.label_offset;
        hdr.ipv4.protocol = INT_LABEL_PROTOCOL;
        hdr.ipv4.total_len = hdr.ipv4.total_len + 2;
    }
    /* This port's item on top of the stack, and its Reg1. */
    action label_push() {
        hdr.label_item.setValid();
        hdr.label_item.device_id = meta.switch_id;
        hdr.label_item.ingress_port = (bit<16>)meta.in_port;
        hdr.label_item.egress_port = (bit<16>)meta.label_port;
        hdr.label_item.label_time = meta.label_ct;
        hdr.label_item.hop_latency = meta.hop_latency;
        hdr.label_item.queue_depth = (bit<32>)std.enq_qdepth;
        hdr.label_item.tx_utilization = meta.tx_util;
        hdr.label_item.reserved = 0;
        hdr.label.int_num = hdr.label.int_num + 1;
        hdr.ipv4.total_len = hdr.ipv4.total_len + 32;
        label_last.write((bit<32>)meta.label_port, meta.label_ct);
    }
    /* The last hop gives the host its packet back without the option. */
    action label_restore() {
        hdr.ipv4.protocol = hdr.label.nh;
        hdr.ipv4.total_len = hdr.ipv4.total_len - 2 - ((bit<16>)meta.label_items << 5);
        hdr.label.setInvalid();
        hdr.label_data.setInvalid();
    }

    apply {
        meta.hop_latency = (bit<32>)((bit<64>)std.egress_global_timestamp * 1000 - meta.in_ns);
        switch_config.apply();
        if (meta.ring == 0 && meta.mea_pass == 0) {
            /* Tx utilisation (kplane_p4::tx_util): a new window takes the utilisation of the
               one before it, or 0 after idle windows; the packet's bytes count in its own. */
            bit<32> port = (bit<32>)std.egress_port;
            bit<48> tick = std.egress_global_timestamp >> 7;
            bit<48> last_tick;
            bit<64> bytes;
            tx_tick.read(last_tick, port);
            tx_bytes.read(bytes, port);
            tx_util.read(meta.tx_util, port);
            if (tick != last_tick) {
                meta.tx_util = 0;
                if (tick == last_tick + 1) {
                    bit<64> u = (bytes * (bit<64>)meta.tx_scale) >> 16;
                    if (u > 1000) { u = 1000; }
                    meta.tx_util = (bit<32>)u;
                }
                tx_tick.write(port, tick);
                tx_util.write(port, meta.tx_util);
                bytes = 0;
            }
            tx_bytes.write(port, bytes + (bit<64>)std.packet_length);
        }
        if (!hdr.ipv4.isValid()) { return; }
        if (meta.ring == RING_HELD) {
            /* SQR's ring: around again (ingress checks for the feedback) until the hold
               time, in µs, is over. */
            if (std.egress_global_timestamp - meta.ring_since >= (bit<48>)meta.probe_hold_us) {
                meta.ring = RING_EXPIRED;
            }
            recirculate_preserving_field_list(2);
            return;
        }
        if (meta.ring == RING_NOTICE) { return; }
        if (hdr.probe_meta.isValid()) {
            if (std.instance_type == 1) {
                /* The feedback: DSCP 0x19, Req META with empty stacks. */
                hdr.ipv4.dscp = PROBE_DSCP_FEEDBACK;
                hdr.ipv4.total_len = 28;
                hdr.probe_meta.n_sr = 0;
                hdr.probe_sr.setInvalid();
                hdr.probe_sr_rest.setInvalid();
                hdr.probe_dlv_count.n = 0;
                hdr.probe_dlv_rest.setInvalid();
                hdr.probe_mea_count.n = 0;
                hdr.probe_mea_rest.setInvalid();
                return;
            }
            /* The measurement: this switch's DLV (first pass) and a counter on top of the
               stacks — its rule hits, or one port's packets per pass — then its SR header
               popped. */
            bit<1> ports = hdr.probe_meta.request[0:0];
            bit<8> first_port = hdr.probe_sr.mea_range[15:8];
            if (meta.mea_pass == 0) {
                hdr.probe_dlv.setValid();
                hdr.probe_dlv.sid = (bit<8>)meta.switch_id;
                hdr.probe_dlv.q_depth = (bit<8>)std.deq_qdepth;
                hdr.probe_dlv.n_mea = 1;
                if (ports == 1) {
                    hdr.probe_dlv.n_mea = (bit<16>)(meta.mea_port - first_port) + 1;
                }
                hdr.probe_dlv_count.n = hdr.probe_dlv_count.n + 1;
                hdr.ipv4.total_len = hdr.ipv4.total_len + 4;
                bit<32> hits;
                probe_hits.read(hits, 0);
                hits = hits + 1;
                probe_hits.write(0, hits);
                meta.mea_value = hits;
            }
            hdr.probe_mea.setValid();
            hdr.probe_mea.value = meta.mea_value;
            hdr.probe_mea_count.n = hdr.probe_mea_count.n + 1;
            hdr.ipv4.total_len = hdr.ipv4.total_len + 4;
            if (ports == 1 && meta.mea_port > first_port) {
                meta.mea_port = meta.mea_port - 1;
                meta.mea_pass = 1;
                recirculate_preserving_field_list(3);
                return;
            }
            hdr.probe_sr.setInvalid();
            hdr.probe_meta.n_sr = hdr.probe_meta.n_sr - 1;
            hdr.ipv4.total_len = hdr.ipv4.total_len - 3;
            /* The protected probe's clone, as it leaves, into the ring. */
            if (meta.ring_protect == 1) {
                meta.ring = RING_HELD;
                meta.ring_since = std.egress_global_timestamp;
                clone_preserving_field_list(CloneType.E2E, PROBE_RING_SESSION, 2);
            }
            return;
        }
        if (std.instance_type == 1 && (hdr.int_shim.isValid() || hdr.kdn.isValid()
                                       || meta.int_source == 1)) {
            /* KDN's O bit: this copy is for the controller. */
            if (hdr.kdn.isValid()) { hdr.kdn.o = 1; }
            /* The INT sink's I2E clone: detection decides whether it becomes a report. Its
               own hop (last) joins the upstream hops the parser read: its latency, queue and
               the host port's utilisation. */
            tx_util.read(meta.tx_util, (bit<32>)meta.sink_port);
            if (meta.algorithm == 2 || meta.algorithm == 3 || meta.algorithm == 4) {
                HOP_TOTALS(0)  HOP_TOTALS(1)  HOP_TOTALS(2)  HOP_TOTALS(3)
                HOP_TOTALS(4)  HOP_TOTALS(5)  HOP_TOTALS(6)  HOP_TOTALS(7)
                HOP_TOTALS(8)  HOP_TOTALS(9)  HOP_TOTALS(10) HOP_TOTALS(11)
                HOP_TOTALS(12) HOP_TOTALS(13) HOP_TOTALS(14) HOP_TOTALS(15)
            }
            bit<32> own_q = (bit<32>)std.enq_qdepth;
            meta.sum_lat = meta.sum_lat + (bit<64>)meta.hop_latency;
            meta.sum_q = meta.sum_q + (bit<64>)own_q;
            meta.sum_tx = meta.sum_tx + (bit<64>)meta.tx_util;
            if (meta.hop_latency > meta.max_lat) { meta.max_lat = meta.hop_latency; }
            if (own_q > meta.max_q) { meta.max_q = own_q; }
            if (meta.tx_util > meta.max_tx) { meta.max_tx = meta.tx_util; }
            bit<32> own = meta.hop_latency;
            bit<64> sum = meta.sum_lat;
            meta.m_off = meta.off_lat;
            meta.m_mask = 0xFFFFFFFF;
            if (meta.measurement == 1) {
                own = own_q; sum = meta.sum_q; meta.m_off = meta.off_q; meta.m_mask = 0xFFFFFF;
            } else if (meta.measurement == 2) {
                own = meta.tx_util; sum = meta.sum_tx; meta.m_off = meta.off_tx;
            }
            bit<12> slot;
            hash(slot, HashAlgorithm.crc16, (bit<12>)0,
                 { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, meta.l4_proto, meta.l4_src, meta.l4_dst,
                   meta.measurement },
                 (bit<24>)4096);
            bool first = false;
            if (meta.algorithm != 0) {
                bit<12> flow_slot;
                hash(flow_slot, HashAlgorithm.crc16, (bit<12>)0,
                     { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, meta.l4_proto, meta.l4_src, meta.l4_dst },
                     (bit<24>)4096);
                bit<32> owner;
                hash(owner, HashAlgorithm.crc32, (bit<32>)0,
                     { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, meta.l4_proto, meta.l4_src, meta.l4_dst },
                     (bit<64>)4294967296);
                owner = owner | 1;
                bit<32> held;
                flow_owner.read(held, (bit<32>)flow_slot);
                if (held != owner) {
                    first = true;
                    flow_owner.write((bit<32>)flow_slot, owner);
                }
            }
            if (meta.algorithm == 0) {
                meta.report = 1;
            } else if (meta.algorithm == 1) {
                /* Per hop: every hop against the last value reported for its node. */
                PER_HOP_UPSTREAM(0)  PER_HOP_UPSTREAM(1)  PER_HOP_UPSTREAM(2)  PER_HOP_UPSTREAM(3)
                PER_HOP_UPSTREAM(4)  PER_HOP_UPSTREAM(5)  PER_HOP_UPSTREAM(6)  PER_HOP_UPSTREAM(7)
                PER_HOP_UPSTREAM(8)  PER_HOP_UPSTREAM(9)  PER_HOP_UPSTREAM(10) PER_HOP_UPSTREAM(11)
                PER_HOP_UPSTREAM(12) PER_HOP_UPSTREAM(13) PER_HOP_UPSTREAM(14) PER_HOP_UPSTREAM(15)
                PER_HOP_CHECK(meta.switch_id, own)
            } else if (meta.algorithm == 2) {
                /* Per flow: the sum over the hops against the flow's last sum reported. */
                bit<64> last;
                bit<1> seen;
                per_flow_last.read(last, (bit<32>)slot);
                per_flow_seen.read(seen, (bit<32>)slot);
                if (seen == 0 || sum > last + (bit<64>)meta.threshold
                        || last > sum + (bit<64>)meta.threshold) {
                    meta.report = 1;
                    per_flow_last.write((bit<32>)slot, sum);
                    per_flow_seen.write((bit<32>)slot, 1);
                }
            } else if (meta.algorithm == 3) {
                /* EWMA of the sum: avg = w·sum + (1 − w)·avg, w = weight_q8 / 256, with 8
                   fractional bits; reported when it moved more than the threshold. */
                bit<64> avg; bit<64> rep; bit<1> seen;
                ewma_avg.read(avg, (bit<32>)slot);
                ewma_reported.read(rep, (bit<32>)slot);
                ewma_seen.read(seen, (bit<32>)slot);
                bit<64> w = (bit<64>)meta.weight_q8;
                if (seen == 0) {
                    avg = sum << 8;
                    meta.report = 1;
                } else {
                    avg = (w * (sum << 8) + (256 - w) * avg) >> 8;
                    if ((avg >> 8) > rep + (bit<64>)meta.threshold
                            || rep > (avg >> 8) + (bit<64>)meta.threshold) {
                        meta.report = 1;
                    }
                }
                ewma_avg.write((bit<32>)slot, avg);
                ewma_seen.write((bit<32>)slot, 1);
                if (meta.report == 1) { ewma_reported.write((bit<32>)slot, avg >> 8); }
            } else {
                /* Complex: every literal is evaluated, so each keeps its register current. */
                meta.report = 1;
                LITERAL(0) LITERAL(1) LITERAL(2) LITERAL(3)
            }
            if (first) { meta.report = 1; }
            meta.inner_words = hdr.ipv4.total_len >> 2;
            if (meta.inner_words > 244) { meta.inner_words = 244; }
            if (meta.report == 1) {
                meta.md_words = 8;
                report_encap();
                report_sink_metadata();
            } else {
                mark_to_drop(std);
            }
            return;
        }
        /* INT-label (Algorithms 1, 2 and 5): the egress port labels the packet. A host-facing
           port decides on the sink's clone (which exports the items), not on the original
           (which leaves restored), so each packet meets each port's decision once. */
        if (meta.label_on == 1 && (std.instance_type == 1 || meta.int_sink == 0)) {
            if (std.instance_type == 1) { meta.label_port = meta.sink_port; }
            else { meta.label_port = std.egress_port; }
            bit<8> int_num = 0;
            bit<8> items = 0;
            if (hdr.label.isValid()) { int_num = hdr.label.int_num; items = meta.label_items; }
            else if (meta.label_specific == 1) { int_num = meta.label_offset; }
            meta.label_ct = (bit<64>)std.egress_global_timestamp * 1000;
            bit<64> last;
            label_last.read(last, (bit<32>)meta.label_port);
            bit<64> elapsed = meta.label_ct - last;
            bit<64> interval = (bit<64>)meta.label_interval;
            if (items < meta.label_max_hop) {
                if (int_num > items || last == 0 || elapsed > interval) {
                    /* A specific flow, a port that never labelled, or T / 2^S elapsed. */
                    meta.label_now = 1;
                } else if (meta.label_algorithm == 1 && elapsed > (bit<64>)meta.label_rest) {
                    /* Base B: with probability f(INT_num), a uniform draw r / 2^16 below it. */
                    bit<32> r;
                    random(r, 0, 65535);
                    bit<64> denom = (bit<64>)meta.label_max_hop - 1;
                    if (meta.label_max_hop < 2) { denom = 1; }
                    bit<64> n = (bit<64>)int_num << 16;
                    if (meta.label_function == 1) {
                        if (int_num > 0) { meta.label_now = 1; }
                    } else if (meta.label_function == 3) {
                        if ((bit<64>)r * denom * interval < n * elapsed) { meta.label_now = 1; }
                    } else {
                        if ((bit<64>)r * denom < n) { meta.label_now = 1; }
                    }
                }
            }
            if (meta.label_now == 1) {
                if (!hdr.label.isValid()) { label_open(); }
                label_push();
            }
        }
        if (std.instance_type == 1) {
            /* The host-facing port's clone: the items go to the collector. */
            if (hdr.label.isValid()) {
                meta.inner_words = hdr.ipv4.total_len >> 2;
                if (meta.inner_words > 244) { meta.inner_words = 244; }
                meta.md_words = 0;
                report_encap();
            } else {
                mark_to_drop(std);
            }
            return;
        }
        if (meta.int_sink == 1) {
            /* The packet leaves the fabric: INT and the INT-label option go (its clone carries
               the report). */
            if (hdr.int_shim.isValid()) { int_strip(); }
            if (hdr.kdn.isValid()) { kdn_strip(); }
            if (hdr.label.isValid()) { label_restore(); }
            return;
        }
        if (meta.int_source == 1 && meta.kdn_source == 1 && hdr.udp.isValid()) {
            bit<16> ib = meta.instruction_bitmap;
            kdn_insert((bit<5>)ib[15:15] + (bit<5>)ib[14:14] + (bit<5>)ib[13:13]
                       + (bit<5>)ib[12:12] + (bit<5>)ib[11:11] + (bit<5>)ib[10:10]
                       + (bit<5>)ib[9:9] + (bit<5>)ib[8:8]);
        } else if (meta.int_source == 1 && meta.kdn_source == 0) {
            int_insert();
        }
        if (hdr.kdn_md.isValid()) {
            if (hdr.kdn_md.total_hop_cnt >= hdr.kdn_md.max_hop_cnt) {
                hdr.kdn_md.e = 1;
            } else {
                meta.words = 0;
                bit<16> b = hdr.kdn_md.instruction_bitmap;
                if (b & 0x8000 != 0) { push_node_id(); }
                if (b & 0x4000 != 0) { push_l1_port_ids(); }
                if (b & 0x2000 != 0) { push_hop_latency(); }
                if (b & 0x1000 != 0) { push_q_occupancy(); }
                if (b & 0x0800 != 0) { push_kdn_ingress_tstamp(); }
                if (b & 0x0400 != 0) { push_kdn_egress_tstamp(); }
                if (b & 0x0200 != 0) { push_kdn_q_congestion(); }
                if (b & 0x0100 != 0) { push_egress_tx_util(); }
                kdn_push_done();
            }
        }
        if (hdr.int_md.isValid()) {
            if (hdr.int_md.remaining_hop_cnt == 0) {
                hdr.int_md.e = 1;
            } else {
                meta.words = 0;
                bit<16> b = hdr.int_md.instruction_bitmap;
                if (b & 0x8000 != 0) { push_node_id(); }
                if (b & 0x4000 != 0) { push_l1_port_ids(); }
                if (b & 0x2000 != 0) { push_hop_latency(); }
                if (b & 0x1000 != 0) { push_q_occupancy(); }
                if (b & 0x0800 != 0) { push_ingress_tstamp(); }
                if (b & 0x0400 != 0) { push_egress_tstamp(); }
                if (b & 0x0200 != 0) { push_l2_port_ids(); }
                if (b & 0x0100 != 0) { push_egress_tx_util(); }
                push_done();
            }
        }
    }
}

control KplaneComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum(hdr.report_ipv4.isValid(),
            { hdr.report_ipv4.version, hdr.report_ipv4.ihl, hdr.report_ipv4.dscp,
              hdr.report_ipv4.ecn, hdr.report_ipv4.total_len, hdr.report_ipv4.identification,
              hdr.report_ipv4.flags, hdr.report_ipv4.frag_offset, hdr.report_ipv4.ttl,
              hdr.report_ipv4.protocol, hdr.report_ipv4.src_addr, hdr.report_ipv4.dst_addr },
            hdr.report_ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control KplaneDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.report_ethernet);
        pkt.emit(hdr.report_ipv4);
        pkt.emit(hdr.report_udp);
        pkt.emit(hdr.report_group);
        pkt.emit(hdr.report_individual);
        pkt.emit(hdr.report_sink_md);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.label);
        pkt.emit(hdr.label_item);
        pkt.emit(hdr.label_data);
        pkt.emit(hdr.probe_meta);
        pkt.emit(hdr.probe_sr);
        pkt.emit(hdr.probe_sr_rest);
        pkt.emit(hdr.probe_dlv_count);
        pkt.emit(hdr.probe_dlv);
        pkt.emit(hdr.probe_dlv_rest);
        pkt.emit(hdr.probe_mea_count);
        pkt.emit(hdr.probe_mea);
        pkt.emit(hdr.probe_mea_rest);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.kdn);
        pkt.emit(hdr.kdn_md);
        pkt.emit(hdr.int_shim);
        pkt.emit(hdr.int_md);
        /* This hop's metadata goes on top of the stack (newest first). */
        pkt.emit(hdr.int_node_id);
        pkt.emit(hdr.int_l1_port_ids);
        pkt.emit(hdr.int_hop_latency);
        pkt.emit(hdr.int_q_occupancy);
        pkt.emit(hdr.int_ingress_tstamp);
        pkt.emit(hdr.kdn_ingress_tstamp);
        pkt.emit(hdr.int_egress_tstamp);
        pkt.emit(hdr.kdn_egress_tstamp);
        pkt.emit(hdr.int_l2_port_ids);
        pkt.emit(hdr.kdn_q_congestion);
        pkt.emit(hdr.int_egress_tx_util);
        pkt.emit(hdr.int_stack);
        pkt.emit(hdr.int_data);
        pkt.emit(hdr.kdn_data);
    }
}

V1Switch(KplaneParser(), KplaneVerifyChecksum(), KplaneIngress(), KplaneEgress(),
         KplaneComputeChecksum(), KplaneDeparser()) main;
