/* intlab's extern for what v1model has no metadata field for: the switch's exact values in
 * nanoseconds and bytes. Include it after v1model.p4. */

#ifndef _INTLAB_P4_
#define _INTLAB_P4_

#include <v1model.p4>

extern intlab_metadata {
    intlab_metadata();
    /* Bytes queued at the egress port when the frame started transmission. */
    bit<32> queue_bytes();
    /* Bytes sent on the egress port before this frame. */
    bit<64> tx_bytes();
    /* When the frame started transmission (ns, lab clock). */
    bit<64> departure_ns();
    /* When the frame arrived (ns, lab clock). */
    bit<64> arrival_ns();
    /* Egress line rate in kb/s. */
    bit<32> line_rate_kbps();
    /* INT node id of this switch. */
    bit<32> node_id();
    /* Largest IP packet the egress link takes (bytes). */
    bit<32> mtu();
}

#endif
