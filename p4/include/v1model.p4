/* intlab's v1model architecture description, written from the v1model documentation of the
 * BMv2 simple_switch target: the standard metadata, the externs and the V1Switch package.
 * Not a copy of p4c's file. Units of the metadata are BMv2's (microseconds, packets). */

#ifndef _V1_MODEL_P4_
#define _V1_MODEL_P4_

#define V1MODEL_METER_COLOR_GREEN 0
#define V1MODEL_METER_COLOR_YELLOW 1
#define V1MODEL_METER_COLOR_RED 2

#include <core.p4>

/* As p4c's v1model: programs choose the version of the extern declarations. Before 20200408,
 * counters, meters and registers are indexed by bit<32>; from it, by a type of their own. */
#ifndef V1MODEL_VERSION
#define V1MODEL_VERSION 20180101
#endif

match_kind {
    range,
    optional,
    selector
}

#if V1MODEL_VERSION >= 20200408
typedef bit<9> PortId_t;
#endif

const bit<32> __v1model_version = V1MODEL_VERSION;

@metadata @name("standard_metadata")
struct standard_metadata_t {
#if V1MODEL_VERSION >= 20200408
    PortId_t ingress_port;
    PortId_t egress_spec;
    PortId_t egress_port;
#else
    bit<9> ingress_port;
    bit<9> egress_spec;
    bit<9> egress_port;
#endif
    bit<32> instance_type;
    bit<32> packet_length;
    @alias("queueing_metadata.enq_timestamp") bit<32> enq_timestamp;
    @alias("queueing_metadata.enq_qdepth") bit<19> enq_qdepth;
    @alias("queueing_metadata.deq_timedelta") bit<32> deq_timedelta;
    @alias("queueing_metadata.deq_qdepth") bit<19> deq_qdepth;
    @alias("intrinsic_metadata.ingress_global_timestamp") bit<48> ingress_global_timestamp;
    @alias("intrinsic_metadata.egress_global_timestamp") bit<48> egress_global_timestamp;
    @alias("intrinsic_metadata.mcast_grp") bit<16> mcast_grp;
    @alias("intrinsic_metadata.egress_rid") bit<16> egress_rid;
    bit<1> checksum_error;
    error parser_error;
    @alias("intrinsic_metadata.priority") bit<3> priority;
    /* simple_switch's queue of the frame at its egress port (its priority), as BMv2 writes
     * `queueing_metadata.qid`; p4c's v1model.p4 has no field for it. */
    @alias("queueing_metadata.qid") bit<5> qid;
}

enum CounterType {
    packets,
    bytes,
    packets_and_bytes
}

enum MeterType {
    packets,
    bytes
}

enum HashAlgorithm {
    crc32,
    crc32_custom,
    crc16,
    crc16_custom,
    random,
    identity,
    csum16,
    xor16
}

enum CloneType {
    I2E,
    E2E
}

#if V1MODEL_VERSION >= 20200408
extern counter<I> {
    counter(bit<32> size, CounterType type);
    void count(in I index);
}
#else
extern counter {
    counter(bit<32> size, CounterType type);
    void count(in bit<32> index);
}
#endif

extern direct_counter {
    direct_counter(CounterType type);
    void count();
}

#if V1MODEL_VERSION >= 20200408
extern meter<I> {
    meter(bit<32> size, MeterType type);
    void execute_meter<T>(in I index, out T result);
}
#else
extern meter {
    meter(bit<32> size, MeterType type);
    void execute_meter<T>(in bit<32> index, out T result);
}
#endif

extern direct_meter<T> {
    direct_meter(MeterType type);
    void read(out T result);
}

#if V1MODEL_VERSION >= 20200408
extern register<T, I> {
    register(bit<32> size);
    @noSideEffects
    void read(out T result, in I index);
    void write(in I index, in T value);
}
#else
extern register<T> {
    register(bit<32> size);
    @noSideEffects
    void read(out T result, in bit<32> index);
    void write(in bit<32> index, in T value);
}
#endif

extern action_profile {
    action_profile(bit<32> size);
}

extern action_selector {
    action_selector(HashAlgorithm algorithm, bit<32> size, bit<32> outputWidth);
}

extern void random<T>(out T result, in T lo, in T hi);
extern void digest<T>(in bit<32> receiver, in T data);
extern void mark_to_drop(inout standard_metadata_t standard_metadata);
// The older form, without an argument, that early tutorial programs still call.
@deprecated("Please use mark_to_drop(standard_metadata) instead.")
extern void mark_to_drop();
extern void hash<O, T, D, M>(out O result, in HashAlgorithm algo, in T base, in D data, in M max);
extern void verify_checksum<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);
extern void update_checksum<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);
extern void verify_checksum_with_payload<T, O>(in bool condition, in T data, in O checksum, HashAlgorithm algo);
extern void update_checksum_with_payload<T, O>(in bool condition, in T data, inout O checksum, HashAlgorithm algo);
extern void resubmit_preserving_field_list(bit<8> index);
extern void recirculate_preserving_field_list(bit<8> index);
@deprecated("Please use verify_checksum/update_checksum instead.")
extern Checksum16 {
    Checksum16();
    bit<16> get<D>(in D data);
}

extern void clone(in CloneType type, in bit<32> session);
@deprecated("Please use 'resubmit_preserving_field_list' instead")
extern void resubmit<T>(in T data);
@deprecated("Please use 'recirculate_preserving_field_list' instead")
extern void recirculate<T>(in T data);
@deprecated("Please use 'clone_preserving_field_list' instead")
extern void clone3<T>(in CloneType type, in bit<32> session, in T data);
extern void clone_preserving_field_list(in CloneType type, in bit<32> session, bit<8> index);
extern void truncate(in bit<32> length);
extern void assert(in bool check);
extern void assume(in bool check);
extern void log_msg(string msg);
extern void log_msg<T>(string msg, in T data);

parser Parser<H, M>(packet_in b, out H parsedHdr, inout M meta, inout standard_metadata_t standard_metadata);
control VerifyChecksum<H, M>(inout H hdr, inout M meta);
@pipeline
control Ingress<H, M>(inout H hdr, inout M meta, inout standard_metadata_t standard_metadata);
@pipeline
control Egress<H, M>(inout H hdr, inout M meta, inout standard_metadata_t standard_metadata);
control ComputeChecksum<H, M>(inout H hdr, inout M meta);
@deparser
control Deparser<H>(packet_out b, in H hdr);

package V1Switch<H, M>(Parser<H, M> p, VerifyChecksum<H, M> vr, Ingress<H, M> ig, Egress<H, M> eg,
                       ComputeChecksum<H, M> ck, Deparser<H> dep);

#endif
