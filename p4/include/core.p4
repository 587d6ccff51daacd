/* intlab's core library for P4_16, written from the P4_16 language specification (the
 * declarations every P4_16 program may use). Not a copy of p4c's file. */

#ifndef _CORE_P4_
#define _CORE_P4_

error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

extern packet_in {
    void extract<T>(out T hdr);
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    T lookahead<T>();
    void advance(in bit<32> sizeInBits);
    bit<32> length();
}

extern packet_out {
    void emit<T>(in T hdr);
}

extern void verify(in bool check, in error toSignal);

@noWarn("unused")
action NoAction() {}

match_kind {
    exact,
    ternary,
    lpm
}

extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

#endif
