/**
 * The table of requests and answers of memcached's ASCII protocol, byte for
 * byte, that protocol.test.ts checks against shardheap and
 * protocol-reference.test.ts against Debian's memcached 1.6, so the table
 * says what memcached says; and the requests those tests send beyond the
 * table, and how a case is run and its answer compared.
 */
import { RawClient } from "./client.js";

export interface Case {
  name: string;
  /** What the client sends; {k} becomes a key of this case's own, {b} that key in base64. */
  send: string;
  /** What the server answers (cas values written as CAS, in meta answers as cCAS). */
  answer: string;
  /**
   * What current memcached (the revision of memcached's own test suite)
   * answers where Debian's 1.6.18 answers `answer`: shardheap follows the
   * suite (a malformed storage line swallows its data block). Checked
   * against shardheap only: no current memcached is installed.
   */
  current?: string;
  /**
   * What shardheap answers, on purpose, otherwise than memcached (the
   * case's comment says why); checked against shardheap, `answer` against
   * Debian's memcached.
   */
  here?: string;
  /** The server closes the connection after answering (no version check follows). */
  closes?: boolean;
  /**
   * Where Debian's memcached 1.6.18 answers otherwise than the revision of
   * memcached whose suite shardheap follows (its t/*.t, doc/protocol.txt):
   * what 1.6.18 does instead. Such a case is checked against shardheap
   * only, not against Debian's binary.
   */
  suiteOnly?: string;
}

const big = (n: number): string => "x".repeat(n);

/**
 * The meta protocol (mg, ms, md, ma, mn, me). A value that reaches the
 * parser as a command shows: "mn" as data answers an extra MN, a
 * "flush_all" empties the cache (the get after it misses).
 */
const META_CASES: Case[] = [
  { name: "mn", send: "mn\r\n", answer: "MN\r\n" },
  { name: "mg of a missing key", send: "mg {k} v\r\nmg {k}\r\n", answer: "EN\r\nEN\r\n" },
  { name: "ms then mg, with and without v", send: "ms {k} 2\r\nhi\r\nmg {k} v\r\nmg {k}\r\n", answer: "HD\r\nVA 2\r\nhi\r\nHD\r\n" },
  { name: "mg's flags come back in their order: s f t k O", send: "ms {k} 3 F7 T0\r\nabc\r\nmg {k} s f t k Oop v\r\nmg {k} Oop k t\r\n", answer: "HD\r\nVA 3 s3 f7 t-1 k{k} Oop\r\nabc\r\nHD Oop k{k} t-1\r\n" },
  { name: "mg h, and u leaves the item unfetched", send: "ms {k} 1\r\nx\r\nmg {k} u h\r\nmg {k} h\r\nmg {k} h\r\n", answer: "HD\r\nHD h0\r\nHD h0\r\nHD h1\r\n" },
  { name: "mg q: hits answered, misses silent, mn ends the batch", send: "ms {k} 1\r\nx\r\nmg {k}x v q\r\nmg {k} v q\r\nmg {k} q\r\nmn\r\n", answer: "HD\r\nVA 1\r\nx\r\nHD\r\nMN\r\n" },
  { name: "base64 keys (b): decoded, and k answers them encoded", send: "ms {b} 2 b\r\npo\r\nmg {b} v\r\nmg {b} b v k\r\nmg {k} v k\r\n", answer: "HD\r\nEN\r\nVA 2 k{b} b\r\npo\r\nVA 2 k{b} b\r\npo\r\n" },
  { name: "a key that is not base64", send: "mg a*b b v\r\nmg abc b v\r\n", answer: "CLIENT_ERROR error decoding key\r\n".repeat(2) },
  { name: "md, and md q", send: "md {k}\r\nms {k} 1\r\nx\r\nmd {k} q\r\nmd {k}\r\nmg {k} v\r\n", answer: "NF\r\nHD\r\nNF\r\nEN\r\n" },
  { name: "md I T: stale, the next mg wins (W), the one after sees the win sent (Z)", send: "ms {k} 1 T100\r\nx\r\nmd {k} I T30\r\nmg {k} v\r\nmg {k} v\r\n", answer: "HD\r\nHD\r\nVA 1 X W\r\nx\r\nVA 1 Z X\r\nx\r\n" },
  { name: "mg N vivifies a miss and wins it", send: "mg {k} N30 s v\r\nmg {k} N30 s v\r\n", answer: "VA 0 s0 W\r\n\r\nVA 0 s0 Z\r\n\r\n" },
  { name: "mg R wins when the TTL is below it", send: "ms {k} 1 T10\r\nx\r\nmg {k} R30 v\r\nmg {k} R30 v\r\nmg {k}y R30 v\r\n", answer: "HD\r\nVA 1 W\r\nx\r\nVA 1 Z\r\nx\r\nEN\r\n" },
  { name: "mg T sets the TTL", send: "ms {k} 1 T100\r\nx\r\nmg {k} T0 t\r\nmg {k} t\r\nmg {k} T-1\r\nmg {k}\r\n", answer: "HD\r\nHD t-1\r\nHD t-1\r\nHD\r\nEN\r\n" },
  { name: "t before T reports the TTL before it", send: "ms {k} 1 T0\r\nx\r\nmg {k} t T-1\r\nmg {k}\r\nma {k}n N0 t T-1\r\nma {k}n\r\n", answer: "HD\r\nHD t-1\r\nEN\r\nHD t-1\r\nNF\r\n" },
  { name: "ma: incr, D, MD, q", send: "ma {k}\r\nset {k} 0 0 1\r\n5\r\nma {k}\r\nma {k} v D10\r\nma {k} MD v D100\r\nma {k} q\r\nmn\r\n", answer: "NF\r\nSTORED\r\nHD\r\nVA 2\r\n16\r\nVA 1\r\n0\r\nMN\r\n" },
  { name: "ma N J vivifies with a seed", send: "ma {k} N0 J13 v\r\nma {k} N0 J13 v t\r\n", answer: "VA 2\r\n13\r\nVA 2 t-1\r\n14\r\n" },
  { name: "ma of a value that is not a number, ma C", send: "ms {k} 1\r\nq\r\nma {k}\r\nma {k} C1\r\n", answer: "HD\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\nEX\r\n" },
  {
    name: "ms modes: add, append, prepend, replace",
    send: "ms {k} 2 ME\r\naa\r\nms {k} 2 ME\r\nbb\r\nms {k} 2 MA\r\ncc\r\nms {k} 2 MP\r\nzz\r\nms {k}x 2 MR\r\nyy\r\nms {k}y 2 MA\r\nyy\r\nmg {k} v s\r\n",
    answer: "HD\r\nNS\r\nHD\r\nHD\r\nNS\r\nNS\r\nVA 6 s6\r\nzzaacc\r\n",
  },
  { name: "ms append with a compared CAS", send: "ms {k} 2 MA C5\r\nhi\r\nms {k} 2\r\nab\r\nms {k} 2 MA C5\r\nhi\r\nms {k} 2 MA N30\r\nhi\r\n", answer: "NS\r\nHD\r\nEX\r\nHD\r\n" },
  { name: "quiet ms, md, ma still answer what is not a success", send: "ms {k} 1 q\r\nx\r\nms {k} 1 q ME\r\ny\r\nmd {k}z q\r\nma {k}z q\r\nmn\r\n", answer: "NS\r\nNF\r\nNF\r\nMN\r\n" },
  { name: "O and k on a miss", send: "mg {k} Oabc k v\r\nmd {k} Oabc k\r\nma {k} Oabc k\r\n", answer: "EN Oabc k{k}\r\nNF Oabc k{k}\r\nNF Oabc k{k}\r\n" },
  { name: "an opaque past 32 bytes", send: `mg {k} O${big(32)}\r\nmg {k} O${big(31)}\r\n`, answer: `CLIENT_ERROR opaque token too long\r\nEN O${big(31)}\r\n` },
  { name: "me of a missing key", send: "me {k}\r\n", answer: "EN\r\n" },
  {
    name: "meta flag errors",
    send: "mg {k} !\r\nmg {k} v v\r\nmg {k} Tabc\r\nma {k} !\r\nma {k} MX\r\nmg {k} Nx\r\nms {k} 1 Fx\r\nx\r\nma {k} Dx\r\nma {k} N0 Jx\r\n",
    answer: "CLIENT_ERROR invalid flag\r\nCLIENT_ERROR duplicate flag\r\nCLIENT_ERROR bad token in command line format\r\nCLIENT_ERROR invalid or duplicate flag\r\nCLIENT_ERROR invalid mode for ma M token\r\nCLIENT_ERROR bad token in command line format\r\nCLIENT_ERROR bad command line format\r\nCLIENT_ERROR invalid or duplicate flag\r\nCLIENT_ERROR invalid or duplicate flag\r\n",
  },
  { name: "more than 20 tokens", send: "mg {k} s v t c f k h l u O1 q P L s1 s2 s3 s4 s5 s6 s7\r\n", answer: "CLIENT_ERROR options flags are too long\r\n" },
  // A data block is never run as a command: an ms refused for its flags or its size swallows its bytes.
  { name: "an ms with a bad flag or mode swallows its data", send: "ms {k} 2 !\r\nmn\r\nms {k} 2 MZ\r\nmn\r\nmn\r\n", answer: "CLIENT_ERROR invalid flag\r\nCLIENT_ERROR invalid mode for ms M token\r\nMN\r\n" },
  { name: "an ms too large swallows its data", send: `ms {k} 2000000 T0\r\n${big(2_000_000)}\r\nmn\r\n`, answer: "SERVER_ERROR object too large for cache\r\nMN\r\n" },
  // Without a length, there is nothing to swallow (memcached runs the next line too).
  { name: "an ms without a length", send: "ms {k} abc\r\nmn\r\nms {k}\r\nmn\r\n", answer: "CLIENT_ERROR bad command line format\r\nMN\r\n".repeat(2) },
  {
    name: "a value of flush_all is never run: malformed, too large or stored",
    send: `set {k} 0 0 1\r\nx\r\nms {k}2 9 !\r\nflush_all\r\nms {k}3 ${11 * 100_000} T0\r\n${"flush_all\r\n".repeat(100_000)}\r\nms {k}4 9 T0\r\nflush_all\r\nget {k}\r\n`,
    answer: "STORED\r\nCLIENT_ERROR invalid flag\r\nSERVER_ERROR object too large for cache\r\nHD\r\nVALUE {k} 0 1\r\nx\r\nEND\r\n",
  },
  // Eight classes differential fuzzing against 1.6 found (test/apps/memcached/differential.test.ts), and what it found after.
  {
    name: "keys are bytes: one past 0x7f comes back as sent (k, VALUE), not re-encoded as UTF-8",
    send: "ms {k}\xe9\xff 1 k\r\nx\r\nmg {k}\xe9\xff k v\r\nget {k}\xe9\xff\r\nma {k}\xe9n N0 k\r\nmd {k}\xe9\xff k q\r\nmd {k}\xe9\xff k\r\n",
    answer: "HD k{k}\xe9\xff\r\nVA 1 k{k}\xe9\xff\r\nx\r\nVALUE {k}\xe9\xff 0 1\r\nx\r\nEND\r\nHD k{k}\xe9n\r\nNF k{k}\xe9\xff\r\n",
  },
  {
    name: "a compared CAS of 0 compares nothing: ms I C0 and cas 0 fail (EX), an append with C0 goes on",
    send: "ms {k} 1\r\na\r\nms {k} 1 I C0\r\nb\r\nmg {k} v\r\ncas {k} 0 0 1 0\r\nc\r\nms {k} 1 MA C0\r\nd\r\nmg {k} v\r\n",
    answer: "HD\r\nEX\r\nVA 1\r\na\r\nEXISTS\r\nHD\r\nVA 2\r\nad\r\n",
  },
  {
    name: "mg and ma apply T and N in their order: t before N reports no TTL, N after T wins",
    send: "mg {k} t N100\r\nma {k}a T-1 N100\r\nmg {k}a v t\r\nma {k}b N100 T-1\r\nmg {k}b v\r\n",
    answer: "HD t-1 W\r\nHD\r\nVA 1 t100\r\n0\r\nHD\r\nEN\r\n",
  },
  {
    name: "R reads the TTL of its place: before T the item's own; a past time reads as a negative TTL's",
    send: "ms {k} 1 T10\r\nx\r\nmg {k} R30 T100\r\nms {k}2 1 T10\r\nx\r\nmg {k}2 T100 R30\r\nms {k}3 1\r\nx\r\nmg {k}3 T-1 R2592001\r\nmg {k}3\r\n",
    answer: "HD\r\nHD W\r\nHD\r\nHD\r\nHD\r\nHD\r\nEN\r\n",
  },
  {
    name: "h: a failed add fetches nothing; an incr written in place keeps the item fetched, md I too",
    send: "set {k} 0 0 2\r\n15\r\nget {k}\r\ndecr {k} 7\r\nmg {k} h v\r\nset {k}x 0 0 1\r\nx\r\nadd {k}x 0 0 1\r\ny\r\nmg {k}x h\r\nmd {k}x I\r\nmg {k}x h\r\nmg {k}x h\r\n",
    answer: "STORED\r\nVALUE {k} 0 2\r\n15\r\nEND\r\n8\r\nVA 2 h1\r\n8 \r\nSTORED\r\nNOT_STORED\r\nHD h0\r\nHD\r\nHD h1 X W\r\nHD h1 Z X\r\n",
  },
  {
    // (an mg before the decr, pipelined, holds memcached's item until its answer is written: its decr makes a new item.)
    name: "an incr in place keeps a stale item stale",
    send: "ms {k} 1 T100\r\n5\r\nmd {k} I\r\ndecr {k} 1\r\nmg {k}\r\nmg {k}\r\n",
    answer: "HD\r\nHD\r\n4\r\nHD X W\r\nHD Z X\r\n",
  },
  {
    name: "base64 keys as memcached decodes them: characters outside the alphabet skipped, a padded block ends the key",
    send: "ms {b*} 1 b k\r\nz\r\nmg {b} b k v\r\nmg {b}QUJD b k\r\nmg Yj*Y b\r\n",
    answer: "HD k{b} b\r\nVA 1 k{b} b\r\nz\r\nHD k{b} b\r\nCLIENT_ERROR error decoding key\r\n",
  },
  { name: "an item mg N makes has no binary key mark: k answers its bytes", send: "mg {b} b k N30\r\nmg {b} b k\r\n", answer: "HD k{k} W\r\nHD k{k} Z\r\n" },
  {
    name: "an incr whose result outgrows the value makes a new item, without the binary key mark; one in place keeps it",
    send: "ms {b} 1 b\r\n9\r\nma {b} b\r\nmg {b} b k v\r\nms {b} 2 b\r\n99\r\nma {b} b MD\r\nmg {b} b k v\r\n",
    answer: "HD\r\nHD\r\nVA 2 k{k}\r\n10\r\nHD\r\nHD\r\nVA 2 k{b} b\r\n98\r\n",
  },
  {
    name: "a bare M is no mode",
    send: "set {k} 0 0 1\r\n5\r\nma {k} M\r\nms {k} 1 M\r\nx\r\nmg {k} v\r\n",
    answer: "STORED\r\nCLIENT_ERROR invalid or duplicate flag\r\nCLIENT_ERROR incorrect length for M token\r\nVA 1\r\n5\r\n",
    // (the suite's memcached reads the byte after the M, a blank or the line's end: no mode it knows.)
    current: "STORED\r\nCLIENT_ERROR invalid mode for ma M token\r\nCLIENT_ERROR invalid mode for ms M token\r\nVA 1\r\n5\r\n",
  },
  {
    name: "ma on an empty value is not a number, whatever C says; C0 compares nothing",
    send: "ms {k} 0\r\n\r\nma {k} C5\r\nma {k} C0\r\nms {k}n 1\r\n7\r\nma {k}n C0 v\r\n",
    answer: "HD\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\nHD\r\nVA 1\r\n8\r\n",
  },
  {
    name: "an opaque too long is found after every other error, and after the command ran up to it",
    send: `mg {k} O${big(32)} Tx\r\nmg {k} O${big(32)} v v\r\nma {k} O${big(32)} Dx\r\nmd {k} O${big(32)} !\r\nset {k} 0 0 1\r\n5\r\nma {k} O${big(32)}\r\nmd {k} O${big(32)}\r\nmg {k} T100 O${big(32)}\r\nmg {k} O${big(32)} T200\r\nmg {k} t v\r\nmg {k}n O${big(32)} N30\r\nmg {k}n t v\r\n`,
    answer:
      "CLIENT_ERROR bad token in command line format\r\nCLIENT_ERROR duplicate flag\r\nCLIENT_ERROR invalid or duplicate flag\r\nCLIENT_ERROR invalid or duplicate flag\r\nSTORED\r\n" +
      "CLIENT_ERROR opaque token too long\r\n".repeat(4) + "VA 1 t100\r\n6\r\nCLIENT_ERROR opaque token too long\r\nVA 0 t-1\r\n\r\n",
    // (the suite's md words its flag errors as mg does.)
    current:
      "CLIENT_ERROR bad token in command line format\r\nCLIENT_ERROR duplicate flag\r\nCLIENT_ERROR invalid or duplicate flag\r\nCLIENT_ERROR invalid flag\r\nSTORED\r\n" +
      "CLIENT_ERROR opaque token too long\r\n".repeat(4) + "VA 1 t100\r\n6\r\nCLIENT_ERROR opaque token too long\r\nVA 0 t-1\r\n\r\n",
  },
  {
    name: "an ms whose opaque is too long",
    send: `ms {k} 1 O${big(32)}\r\nz\r\nmg {k} v\r\n`,
    answer: "CLIENT_ERROR opaque token too long\r\nEN\r\n",
    // (the suite's memcached stores the value, then finds the opaque as it writes the answer.)
    current: "CLIENT_ERROR opaque token too long\r\nVA 1\r\nz\r\n",
  },
  {
    name: "an ma q that creates the item is quiet",
    send: "ma {k} q N0 J5\r\nmg {k} v\r\n",
    answer: "HD\r\nVA 1\r\n5\r\n",
    current: "VA 1\r\n5\r\n",
  },
  // Where memcached 1.6.18 differs from the suite's revision (followed here).
  { name: "mg C hides a value that has not changed; E sets the CAS", send: "ms {k} 2 E77\r\nab\r\nmg {k} C77 v c\r\nmg {k} C76 v c\r\n", answer: "HD\r\nHD cCAS\r\nVA 2 cCAS\r\nab\r\n", suiteOnly: "no E flag: CLIENT_ERROR invalid flag" },
  { name: "md C", send: "ms {k} 1 E100\r\nx\r\nmd {k} C99\r\nmd {k} C100\r\n", answer: "HD\r\nEX\r\nHD\r\n", suiteOnly: "no E flag" },
  { name: "ms c s k O, and c0 on failure", send: "ms {k} 2 c s k Oxy\r\nab\r\nms {k} 2 C1 c s\r\ncd\r\n", answer: "HD cCAS s2 k{k} Oxy\r\nEX cCAS s2\r\n", suiteOnly: "ms has no s flag" },
  { name: "ms I with a lower CAS stores a stale value", send: "ms {k} 2 T100 E50\r\nab\r\nms {k} 2 I C40\r\ncd\r\nmg {k} v c\r\nmg {k} v\r\n", answer: "HD\r\nHD\r\nVA 2 cCAS X W\r\ncd\r\nVA 2 Z X\r\ncd\r\n", suiteOnly: "no E flag" },
  { name: "md x leaves an empty value", send: "ms {k} 2 F5 T100\r\nab\r\nmd {k} x\r\nmg {k} v f t\r\n", answer: "HD\r\nHD\r\nVA 0 f0 t-1\r\n\r\n", suiteOnly: "no x flag: CLIENT_ERROR invalid or duplicate flag" },
  { name: "ms append N vivifies, s gives the new size", send: "ms {k} 2 MA N30 s\r\nhi\r\nms {k} 2 MA s\r\nho\r\n", answer: "HD s2\r\nHD s4\r\n", suiteOnly: "no append vivify, no s: NS, HD" },
  { name: "ma E, C, T and t", send: "ma {k} N0 E40 c v\r\nma {k} C39 v\r\nma {k} C40 c v E45\r\nma {k} c T100 t v\r\n", answer: "VA 1 cCAS\r\n0\r\nEX\r\nVA 1 cCAS\r\n1\r\nVA 1 cCAS t100\r\n2\r\n", suiteOnly: "no E flag" },
  { name: "an ms whose key is too long swallows its data", send: `ms ${big(251)} 2\r\nmn\r\nmn\r\n`, answer: "CLIENT_ERROR bad command line format\r\nMN\r\n", suiteOnly: "runs the data: a second MN" },
  { name: "mg without a key, md's flag errors", send: "mg\r\nmd {k} !\r\n", answer: "CLIENT_ERROR bad command line format\r\nCLIENT_ERROR invalid flag\r\n", suiteOnly: "ERROR, CLIENT_ERROR invalid or duplicate flag" },
];

export const CASES: Case[] = [
  { name: "get of a missing key", send: "get {k}\r\n", answer: "END\r\n" },
  { name: "set then get", send: "set {k} 5 0 5\r\nhello\r\nget {k}\r\n", answer: "STORED\r\nVALUE {k} 5 5\r\nhello\r\nEND\r\n" },
  { name: "gets gives the cas", send: "set {k} 0 0 2\r\nhi\r\ngets {k}\r\n", answer: "STORED\r\nVALUE {k} 0 2 CAS\r\nhi\r\nEND\r\n" },
  { name: "bget, memcached's old alias", send: "set {k} 0 0 1\r\nb\r\nbget {k}\r\n", answer: "STORED\r\nVALUE {k} 0 1\r\nb\r\nEND\r\n" },
  {
    name: "multi-get skips the missing keys",
    send: "set {k}1 1 0 1\r\na\r\nset {k}3 3 0 3\r\nccc\r\nget {k}1 {k}2 {k}3 {k}1\r\n",
    answer: "STORED\r\nSTORED\r\nVALUE {k}1 1 1\r\na\r\nVALUE {k}3 3 3\r\nccc\r\nVALUE {k}1 1 1\r\na\r\nEND\r\n",
  },
  { name: "spaces between tokens", send: "set  {k}  0  0  1 \r\nx\r\nget   {k}  \r\n", answer: "STORED\r\nVALUE {k} 0 1\r\nx\r\nEND\r\n" },
  { name: "lines may end in a bare \\n", send: "get {k}\n", answer: "END\r\n" },
  { name: "an empty value", send: "set {k} 0 0 0\r\n\r\nget {k}\r\n", answer: "STORED\r\nVALUE {k} 0 0\r\n\r\nEND\r\n" },
  { name: "a value holding \\r\\n", send: "set {k} 0 0 4\r\n\r\n\r\n\r\nget {k}\r\n", answer: "STORED\r\nVALUE {k} 0 4\r\n\r\n\r\n\r\nEND\r\n" },
  { name: "the largest flags", send: "set {k} 4294967295 0 1\r\nf\r\nget {k}\r\n", answer: "STORED\r\nVALUE {k} 4294967295 1\r\nf\r\nEND\r\n" },
  { name: "add stores only a new key", send: "add {k} 0 0 1\r\na\r\nadd {k} 0 0 1\r\nb\r\nget {k}\r\n", answer: "STORED\r\nNOT_STORED\r\nVALUE {k} 0 1\r\na\r\nEND\r\n" },
  { name: "replace stores only an existing key", send: "replace {k} 0 0 1\r\na\r\nset {k} 0 0 1\r\nb\r\nreplace {k} 7 0 1\r\nc\r\nget {k}\r\n", answer: "NOT_STORED\r\nSTORED\r\nSTORED\r\nVALUE {k} 7 1\r\nc\r\nEND\r\n" },
  {
    name: "append and prepend keep flags, need the key",
    send: "append {k} 0 0 1\r\na\r\nset {k} 9 0 2\r\nbc\r\nappend {k} 1 0 2\r\nde\r\nprepend {k} 2 0 1\r\na\r\nget {k}\r\n",
    answer: "NOT_STORED\r\nSTORED\r\nSTORED\r\nSTORED\r\nVALUE {k} 9 5\r\nabcde\r\nEND\r\n",
  },
  { name: "cas of a missing key", send: "cas {k} 0 0 1 1\r\nx\r\n", answer: "NOT_FOUND\r\n" },
  { name: "cas with a stale value", send: "set {k} 0 0 1\r\nx\r\ncas {k} 0 0 1 999999999\r\ny\r\nget {k}\r\n", answer: "STORED\r\nEXISTS\r\nVALUE {k} 0 1\r\nx\r\nEND\r\n" },
  { name: "delete", send: "delete {k}\r\nset {k} 0 0 1\r\nx\r\ndelete {k}\r\nget {k}\r\n", answer: "NOT_FOUND\r\nSTORED\r\nDELETED\r\nEND\r\n" },
  { name: "delete with the old hold time of 0", send: "set {k} 0 0 1\r\nx\r\ndelete {k} 0\r\n", answer: "STORED\r\nDELETED\r\n" },
  { name: "delete with any other hold time", send: "delete {k} 5\r\n", answer: "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n" },
  { name: "incr and decr", send: "set {k} 0 0 2\r\n10\r\nincr {k} 5\r\ndecr {k} 3\r\ndecr {k} 100\r\nincr {k} 18446744073709551615\r\n", answer: "STORED\r\n15\r\n12\r\n0\r\n18446744073709551615\r\n" },
  { name: "incr wraps at 2^64", send: "set {k} 0 0 20\r\n18446744073709551615\r\nincr {k} 2\r\n", answer: "STORED\r\n1\r\n" },
  { name: "a shorter decr result is padded in place", send: "set {k} 0 0 3\r\n100\r\ndecr {k} 1\r\nget {k}\r\n", answer: "STORED\r\n99\r\nVALUE {k} 0 3\r\n99 \r\nEND\r\n" },
  { name: "a longer incr result makes a new item", send: "set {k} 3 0 1\r\n9\r\nincr {k} 1\r\nget {k}\r\n", answer: "STORED\r\n10\r\nVALUE {k} 3 2\r\n10\r\nEND\r\n" },
  { name: "incr reads numbers as strtoull does", send: "set {k} 0 0 3\r\n 12\r\nincr {k} 1\r\nset {k} 0 0 3\r\n12a\r\nincr {k} 1\r\n", answer: "STORED\r\n13\r\nSTORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n" },
  { name: "incr of a number past 2^64", send: "set {k} 0 0 21\r\n184467440737095516150\r\nincr {k} 1\r\n", answer: "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n" },
  {
    name: "incr deltas with a sign",
    send: "set {k} 0 0 2\r\n10\r\nincr {k} -0\r\nincr {k} +1\r\n",
    answer: "STORED\r\n10\r\n11\r\n",
    current: "STORED\r\n" + "CLIENT_ERROR invalid numeric delta argument\r\n".repeat(2),
  },
  {
    name: "gat and touch with an exptime past 2^31",
    send: "set {k} 0 0 1\r\nx\r\ngat 2147483648 {k}\r\ntouch {k} 2147483648\r\nget {k}\r\n",
    // (1.6.18's strtol kept the low 32 bits: -2^31, expired; current memcached's tokenizer refuses the number.)
    answer: "STORED\r\nVALUE {k} 0 1\r\nx\r\nEND\r\nNOT_FOUND\r\nEND\r\n",
    current: "STORED\r\n" + "CLIENT_ERROR invalid exptime argument\r\n".repeat(2) + "VALUE {k} 0 1\r\nx\r\nEND\r\n",
  },
  { name: "incr of a missing key", send: "incr {k} 1\r\ndecr {k} 1\r\n", answer: "NOT_FOUND\r\nNOT_FOUND\r\n" },
  { name: "incr by something that is not a number", send: "incr {k} abc\r\nincr {k} -1\r\nincr {k} 18446744073709551616\r\n", answer: "CLIENT_ERROR invalid numeric delta argument\r\n".repeat(3) },
  { name: "touch", send: "touch {k} 10\r\nset {k} 0 0 1\r\nx\r\ntouch {k} 10\r\ntouch {k} abc\r\n", answer: "NOT_FOUND\r\nSTORED\r\nTOUCHED\r\nCLIENT_ERROR invalid exptime argument\r\n" },
  { name: "gat and gats", send: "set {k} 4 0 1\r\ng\r\ngat 100 {k} {k}x\r\ngats 100 {k}\r\ngat 10\r\n", answer: "STORED\r\nVALUE {k} 4 1\r\ng\r\nEND\r\nVALUE {k} 4 1 CAS\r\ng\r\nEND\r\nEND\r\n" },
  { name: "gat with a bad exptime", send: "gat abc {k}\r\n", answer: "CLIENT_ERROR invalid exptime argument\r\n" },
  { name: "a negative exptime expires at once", send: "set {k} 0 -1 1\r\nx\r\nget {k}\r\n", answer: "STORED\r\nEND\r\n" },
  { name: "gat with a negative exptime expires the item", send: "set {k} 0 0 1\r\nx\r\ngat -1 {k}\r\nget {k}\r\n", answer: "STORED\r\nVALUE {k} 0 1\r\nx\r\nEND\r\nEND\r\n" },
  { name: "noreply silences answers", send: "set {k} 0 0 1 noreply\r\na\r\nadd {k} 0 0 1 noreply\r\nb\r\nappend {k} 0 0 1 noreply\r\nc\r\nincr {k}n 1 noreply\r\ntouch {k} 100 noreply\r\nget {k}\r\ndelete {k} noreply\r\nget {k}\r\n", answer: "VALUE {k} 0 2\r\nac\r\nEND\r\nEND\r\n" },
  {
    name: "noreply silences errors too",
    send: "set {k} 0 0 x noreply\r\nincr {k} x noreply\r\ntouch {k} x noreply\r\ndelete {k} 5 noreply\r\nverbosity noreply\r\n",
    answer: "",
    // (current memcached reads a storage line's length before its noreply: a bad length is answered.)
    current: "CLIENT_ERROR bad command line format\r\n",
  },
  { name: "noreply is the last token only", send: "set {k} 0 0 1 garbage\r\nx\r\n", answer: "STORED\r\n" },
  { name: "verbosity", send: "verbosity 1\r\nverbosity\r\nverbosity x\r\nverbosity 1 noreply\r\n", answer: "OK\r\nERROR\r\nCLIENT_ERROR bad command line format\r\n" },
  { name: "version takes any argument", send: "version foo bar\r\n", answer: "VERSION\r\n" },
  {
    name: "an unknown command",
    send: "bogus\r\nGET {k}\r\n\r\nx\r\n",
    answer: "ERROR\r\nERROR\r\nERROR\r\nERROR\r\n",
    current: "ERROR\r\nERROR\r\n" + "CLIENT_ERROR bad command line format\r\n".repeat(2),
  },
  // (current memcached refuses a line under 4 bytes, its \n and \r counted: "mn\n" is one.)
  { name: "lines under 4 bytes", send: "x\r\n \nmn\n\r\nmn\r\n", answer: "ERROR\r\nERROR\r\nMN\r\nERROR\r\nMN\r\n", current: "CLIENT_ERROR bad command line format\r\n".repeat(4) + "MN\r\n" },
  {
    // There are no slab pages to move here (a free page span serves any class): shardheap answers as memcached
    // with its slab mover off (-o no_slab_reassign) and refuses to turn automove on, where memcached says OK and
    // does nothing. Current memcached takes abbreviated subcommands ("slabs a 0", strncmp) and automove window.
    name: "slabs automove and reassign",
    send: "slabs automove invalid\r\nslabs automove 0\r\nslabs automove 1\r\nslabs automove 3\r\nslabs reassign 1 2\r\nslabs reassign a 2\r\nslabs\r\nslabs automove\r\nslabs automove ratio x\r\n",
    answer:
      "CLIENT_ERROR bad command line format\r\nOK\r\nOK\r\nERROR\r\nNOSPARE source class has no spare pages\r\nCLIENT_ERROR bad command line format\r\nERROR\r\nERROR\r\nERROR\r\n",
    here:
      "CLIENT_ERROR bad command line format\r\nOK\r\nCLIENT_ERROR slab reassignment disabled\r\nERROR\r\nCLIENT_ERROR slab reassignment disabled\r\nCLIENT_ERROR bad command line format\r\nERROR\r\nERROR\r\nERROR\r\n",
  },
  {
    name: "slabs subcommands as current memcached reads them",
    send: "slabs a 0\r\nslabs automove window 2\r\nslabs automove window 60\r\n",
    answer: "ERROR\r\nCLIENT_ERROR bad command line format\r\nCLIENT_ERROR bad command line format\r\n",
    current: "OK\r\nCLIENT_ERROR automove window too low or too high\r\nCLIENT_ERROR slab reassignment disabled\r\n",
  },
  { name: "a command with too few or too many tokens", send: "get\r\nincr {k}\r\ntouch {k}\r\ndelete a b c d\r\n", answer: "ERROR\r\n".repeat(4) },
  { name: "a storage line with too few tokens", send: "set {k} 0 0\r\nadd {k}\r\n", answer: "ERROR\r\nERROR\r\n", current: "CLIENT_ERROR bad command line format\r\n".repeat(2) },
  {
    name: "a storage line with too many tokens",
    send: "set {k} 0 0 1 2 3\r\nx\r\ncas {k} 0 0 1 1 2 3\r\nx\r\n",
    answer: "ERROR\r\nERROR\r\nERROR\r\nERROR\r\n",
    // (current memcached reads the tokens it needs and ignores the rest.)
    current: "STORED\r\nEXISTS\r\n",
  },
  {
    name: "a key longer than 250 bytes",
    send: `get ${big(251)}\r\nset ${big(251)} 0 0 1\r\nx\r\nget ${big(250)}\r\n`,
    answer: "CLIENT_ERROR bad command line format\r\nCLIENT_ERROR bad command line format\r\nERROR\r\nEND\r\n",
    current: "CLIENT_ERROR bad command line format\r\nCLIENT_ERROR bad command line format\r\nEND\r\n",
  },
  // memcached's cas.t: the data of a cas without its cas value is not a command.
  { name: "a cas line without its cas value", send: "cas {k} 0 0 6 \r\nbarva2\r\n", answer: "ERROR\r\nERROR\r\n", current: "CLIENT_ERROR bad command line format\r\n" },
  {
    name: "malformed flags, exptime or cas: the data block is swallowed",
    send: "set {k} a 0 1\r\nx\r\nset {k} 0 a 1\r\nx\r\nset {k} -1 0 1\r\nx\r\nadd {k} 0 0x1 1\r\nx\r\ncas {k} 0 0 1 -5\r\nx\r\nset {k} a 0 9 noreply\r\nflush_all\r\nget {k}\r\n",
    // (1.6.18 ran the noreply line's data, a flush_all.)
    answer: "CLIENT_ERROR bad command line format\r\nERROR\r\n".repeat(5) + "OK\r\nEND\r\n",
    current: "CLIENT_ERROR bad command line format\r\n".repeat(5) + "END\r\n",
  },
  // (memcached 1.6.18 also drops answers pipelined before such a get; shardheap keeps them.)
  { name: "a key too long among good ones", send: `get {k} ${big(251)} {k}\r\n`, answer: "CLIENT_ERROR bad command line format\r\n" },
  // A length that cannot be read: nothing is swallowed (its size is unknown).
  { name: "malformed lengths", send: "set {k} 0 0 -1\r\nset {k} 0 0 1.5\r\n", answer: "CLIENT_ERROR bad command line format\r\n".repeat(2) },
  // memcached's strtoul and strtol keep the low 32 bits (a 64-bit build): flags 2^32 + 7 are 7; an exptime of 2^31 is -2^31 (expired), 2^32 is 0 (never).
  {
    name: "flags and exptimes past 32 bits, as memcached stores them",
    send: "set {k} 4294967303 0 1\r\nf\r\nget {k}\r\nset {k}2 0 2147483648 1\r\nx\r\nget {k}2\r\nset {k}3 0 4294967296 1\r\ny\r\nget {k}3\r\n",
    answer: "STORED\r\nVALUE {k} 7 1\r\nf\r\nEND\r\nSTORED\r\nEND\r\nSTORED\r\nVALUE {k}3 0 1\r\ny\r\nEND\r\n",
  },
  // (What is left of the line after the block, "\n", is a line under 4 bytes: current memcached refuses it as such.)
  {
    name: "a data block without its \\r\\n",
    send: "set {k} 0 0 5\r\nhelloX\r\nget {k}\r\n",
    answer: "CLIENT_ERROR bad data chunk\r\nERROR\r\nEND\r\n",
    current: "CLIENT_ERROR bad data chunk\r\nCLIENT_ERROR bad command line format\r\nEND\r\n",
  },
  { name: "a data block too short", send: "set {k} 0 0 1\r\nxy\r\n", answer: "CLIENT_ERROR bad data chunk\r\nERROR\r\n", current: "CLIENT_ERROR bad data chunk\r\nCLIENT_ERROR bad command line format\r\n" },
  { name: "a NUL ends the line", send: "set {k} 0 0 1\r\nx\r\nget {k}\u0000junk\r\n", answer: "STORED\r\nVALUE {k} 0 1\r\nx\r\nEND\r\n" },
  { name: "a value too large for an item", send: `set {k} 0 0 1\r\nx\r\nset {k} 0 0 2000000\r\n${big(2_000_000)}\r\nget {k}\r\n`, answer: "STORED\r\nSERVER_ERROR object too large for cache\r\nEND\r\n" },
  { name: "stats with unknown arguments", send: "stats noreply\r\nstats bogus\r\n", answer: "ERROR\r\nERROR\r\n" },
  { name: "stats reset", send: "stats reset\r\n", answer: "RESET\r\n" },
  { name: "stats detail without on, off or dump", send: "stats detail\r\nstats detail bogus\r\n", answer: "CLIENT_ERROR usage: stats detail on|off|dump\r\n".repeat(2) },
  {
    name: "stats cachedump's errors, and an empty class",
    send: "stats cachedump\r\nstats cachedump 1\r\nstats cachedump x 1\r\nstats cachedump 64 1\r\nstats cachedump 63 1\r\n",
    answer: "CLIENT_ERROR bad command line\r\nCLIENT_ERROR bad command line\r\nCLIENT_ERROR bad command line format\r\nCLIENT_ERROR Illegal slab id\r\nEND\r\n",
  },
  { name: "stats sizes (no size histogram tracked)", send: "stats sizes\r\n", answer: "STAT sizes_status disabled\r\nEND\r\n" },
  {
    name: "cache_memlimit's errors",
    send: "cache_memlimit\r\ncache_memlimit abc\r\ncache_memlimit -5\r\ncache_memlimit 7\r\ncache_memlimit 2000000000\r\ncache_memlimit 100 x y\r\ncache_memlimit 7 noreply\r\n",
    answer: "ERROR\r\nERROR\r\nERROR\r\nMEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\nMEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\nERROR\r\n",
  },
  { name: "flush_all", send: "set {k} 0 0 1\r\nx\r\nflush_all\r\nget {k}\r\nflush_all abc\r\nflush_all 0 noreply\r\nflush_all 0 2 3\r\n", answer: "STORED\r\nOK\r\nEND\r\nCLIENT_ERROR invalid exptime argument\r\nERROR\r\n", current: "STORED\r\nOK\r\nEND\r\nCLIENT_ERROR invalid exptime argument\r\nOK\r\n" },
  { name: "quit", send: "get {k}\r\nquit\r\nget {k}\r\n", answer: "END\r\n", closes: true },
  ...META_CASES,
  { name: "an HTTP request is hung up on", send: "GET / HTTP/1.1\r\nHost: x\r\n\r\n", answer: "", closes: true },
];

/**
 * Meta commands as memcached counts them in stats: an mg is a get (a hit
 * with T a touch), md a delete, ma an incr or decr, ms a set (its C a cas).
 */
export const META_COUNTED = {
  script: "mg {k}a v\r\nms {k}b 1\r\nx\r\nmg {k}b v\r\nmg {k}b s\r\nmg {k}b T30\r\nmg {k}c T30\r\nmd {k}b\r\nmd {k}b\r\nma {k}d\r\nms {k}d 1\r\n5\r\nma {k}d\r\nma {k}d MD\r\nma {k}e MD\r\nms {k}f 1 C5\r\nx\r\nms {k}d 1 C5\r\nx\r\nmg {k}g N30\r\nmg {k}g N30\r\nma {k}h N0\r\nms {k}i 1 T-1\r\nx\r\nmg {k}i v\r\nme {k}g\r\nmn\r\n",
  counts: { cmd_get: 7, get_hits: 4, get_misses: 3, get_expired: 1, cmd_touch: 1, touch_hits: 1, touch_misses: 0, cmd_set: 5, delete_hits: 1, delete_misses: 1, incr_hits: 1, incr_misses: 1, decr_hits: 1, decr_misses: 1, cas_hits: 0, cas_misses: 1, cas_badval: 1, curr_items: 3 },
};

/** me's answer for an item just set, fetched once (its figures vary: la, cas, cls and size are checked by form). */
export async function debugLine(port: number, key: string): Promise<string> {
  const client = await RawClient.open(port);
  try {
    await client.request(`ms ${key} 3 T100\r\nabc\r\nmg ${key} v\r\n`, "abc\r\n");
    return await client.request(`me ${key}\r\n`, "\r\n");
  } finally {
    client.close();
  }
}
export const DEBUG_LINE = /^ME (\S+) exp=(99|100) la=[01] cas=\d+ fetch=yes cls=\d+ size=\d+\r\n$/;

/**
 * A key with bytes past 0x7f, as me and stats cachedump write it back (its
 * bytes, not re-encoded as UTF-8), and the TTL t reports for an item
 * whose exptime has passed already (mg N-1 t): memcached's itoa_u32 of a
 * negative difference, 2^32 less the item's age counted from memcached's
 * clock start (a small server's uptime: at least 2^31). The cachedump is
 * of class 1, where a small item is.
 */
export async function highBytes(port: number): Promise<{ me: string; dump: string; ttl: number }> {
  const client = await RawClient.open(port);
  try {
    const key = "hi\xe9\xff";
    await client.request(`ms ${key} 1\r\nx\r\n`, "HD\r\n");
    const me = await client.request(`me ${key}\r\n`, "\r\n");
    const dump = await client.request("stats cachedump 1 0\r\n", /(^|\n)END\r\n$/);
    const wrapped = await client.request("mg hiwrap N-1 t\r\n", "\r\n");
    return { me, dump, ttl: Number(/^HD t(\d+) W\r\n$/.exec(wrapped)?.[1] ?? -1) };
  } finally {
    client.close();
  }
}

/** Four keys, each stored and asked for on the connection's shard. */
const ME_KEYS = [0, 1, 2, 3].map((i) => `bin${i}.0`);
const b64 = (key: string): string => Buffer.from(key, "latin1").toString("base64");
const literally = (text: string): string => text.replace(/[+/=.]/g, (c) => `\\${c}`);
/**
 * me's key as memcached writes it: an item stored with a base64 key (ms
 * ... b) answers it in base64, as sent, whether asked with b or by its
 * bytes (memcached re-encodes it from the item's binary flag); an item
 * stored with a plain key answers it plain, even asked in base64. Each me
 * right behind its ms, pipelined.
 */
export const BINARY_ME = {
  send: ME_KEYS.map((k, i) => (i < 2 ? `ms ${b64(k)} 2 b\r\npo\r\nme ${b64(k)} b\r\nme ${k}\r\n` : `ms ${k} 2\r\npo\r\nme ${b64(k)} b\r\n`)).join("") + "mn\r\n",
  answer: new RegExp(
    "^" +
      ME_KEYS.map((k, i) => {
        const line = `ME ${literally(i < 2 ? b64(k) : k)} exp=-1 la=\\d+ cas=\\d+ fetch=no cls=\\d+ size=\\d+\\r\\n`;
        return i < 2 ? `HD\\r\\n${line}${line}` : `HD\\r\\n${line}`;
      }).join("") +
      "MN\\r\\n$",
  ),
};

/** What BINARY_ME's requests answer, on a connection of their own. */
export async function binaryMe(port: number): Promise<string> {
  const client = await RawClient.open(port);
  try {
    return await client.request(BINARY_ME.send, "MN\r\n");
  } finally {
    client.close();
  }
}

/** How much each of `fields` of stats grew while `script` ran (ending in mn), on a connection of its own. */
export async function counted(port: number, script: string, fields: readonly string[]): Promise<Record<string, number>> {
  const client = await RawClient.open(port);
  try {
    const read = async (): Promise<Map<string, number>> => {
      const text = await client.request("stats\r\n", "END\r\n");
      return new Map(text.split("\r\n").filter((l) => l.startsWith("STAT ")).map((l) => [l.split(" ")[1]!, Number(l.split(" ")[2])]));
    };
    const before = await read();
    await client.request(script, "MN\r\n");
    const after = await read();
    return Object.fromEntries(fields.map((f) => [f, after.get(f)! - before.get(f)!]));
  } finally {
    client.close();
  }
}

/** The same answer whatever the cas values and version. */
export function normal(text: string): string {
  return text
    .replace(/^(VALUE \S+ \d+ \d+) \d+\r\n/gm, "$1 CAS\r\n")
    .replace(/^VERSION \S*\r\n/gm, "VERSION\r\n")
    .replace(/^(?:HD|VA|EN|NF|NS|EX)\b[^\r\n]*/gm, (l) => l.replace(/ c\d+/g, " cCAS"));
}

/** A case's bytes with its key, {k}, that key in base64, {b}, and {b*}: {b} with characters memcached's decoder skips. */
export function fill(text: string, key: string): string {
  const b = Buffer.from(key, "latin1").toString("base64");
  return text.replaceAll("{k}", key).replaceAll("{b*}", `${b.slice(0, 2)}*${b.slice(2, 5)}-${b.slice(5)}`).replaceAll("{b}", b);
}

/** Run one case on its own connection; its answer (a `version` after it marks the end unless it closes). */
export async function run(port: number, c: Case, key: string): Promise<string> {
  const client = await RawClient.open(port);
  try {
    const send = fill(c.send, key);
    if (c.closes) {
      client.send(send);
      return normal(await client.untilClosed());
    }
    const got = await client.request(`${send}version\r\n`, /VERSION [^\r\n]*\r\n$/, 20_000);
    return normal(got).replace(/VERSION\r\n$/, "");
  } finally {
    client.close();
  }
}

/** What shardheap answers: as current memcached, but where it differs on purpose. */
export function expected(c: Case, key: string): string {
  return fill(c.here ?? c.current ?? c.answer, key);
}

/** What Debian's memcached 1.6.18 answers. */
export function expected1618(c: Case, key: string): string {
  return fill(c.answer, key);
}
