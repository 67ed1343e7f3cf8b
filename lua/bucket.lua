--[[
bucket.lua - token-bucket decisions, atomically, inside Redis.

One call decides one or more items in order. Its keys are bucket state keys
only (server/stores/policy.c lays them out); the policies' limits come in
ARGV, from permitd's in-memory copy of each policy
(server/decisions/policies.c): this script reads no policy hash, so a keyed
bucket may live in a slot of its own.
  KEYS[i]     item i's bucket state, for i = 1..m (m = #KEYS: all of one
              Redis Cluster slot)
  ARGV[1]     "take" (Acquire), "peek" (Peek: nothing taken), "all"
              (all or nothing: every item is granted, or none takes anything),
              or "settle" (see the settle section below); the other
              algorithms' scripts also know "release" and "renew"
              (concurrency); "refund" (issue 38: permits given back,
              one wide item; lua/lib/refund_<algorithm>.lua, in every
              script but concurrency's)
  ARGV[2]     np, the number of policies whose limits follow
  ARGV[3]     how long (ms) a take's answer is kept for its request id;
              "" when no item of the call carries a request id or a lease
              id: the compact call (nearly every call: permitd's
              call_head()), 2 ARGV an item and a short RECORD (below)
  ARGV[4+4(j-1)..7+4(j-1)]  policy j: its version stamp, max_permits, p1,
              p2. For this script p1 is the rate and p2 the rate history
              `rates` ("" when none; see below). The other algorithms
              (lua/<algorithm>.lua, issue 20) take the same call with:
                fixed_window    window_ms, calendar ("" | minute | hour |
                                day | month: windows aligned in UTC)
                sliding_window  window_ms, ""
                sliding_log     window_ms, ""
                concurrency     lease_ms,  ""
  ARGV[b+w(i-1) .. b+w(i-1)+w-1]  with b = 4 + 4 np and w = 4 (2 in a
              compact call): item i's policy (j, 1..np), its permits
              (>= 1), then, when w = 4, its request id ("" none) and its
              lease id ("" none; concurrency only: the new lease's id on a
              take, 32 lowercase hex characters permitd drew from
              getrandom(), the lease to act on for release and renew)
  ARGV[b+wn+(i-m-1)]  for i = m+1..n: item i's bucket state key, when the
              items' keys span several slots of one Redis Cluster master
              (then m = 1; n = (#ARGV - b + 1 + m) / (w + 1), which is m
              when no key follows the items)

Over several slots (issue 19): permitd sends a pass's Acquires and Peeks
as one call per master, not per slot. What Redis 7.0.15 does with such a
call, measured on the test stack's cluster (3 masters):
  - the declared KEYS must share one slot, shebang or not: EVALSHA with
    keys of two slots, both served by the node asked, answers "CROSSSLOT
    Keys in request don't hash to the same slot" before the script runs.
    Hence one declared key (it routes the call: a slot the node does not
    serve answers MOVED or ASK as for any call) and the others in ARGV;
  - a key in ARGV of another slot of the same node is served: a script
    without a `#!lua` line may touch such keys (Redis keeps the old
    behaviour of scripts without flags). This script has no such line on
    purpose: with one, Redis takes a script that does not declare
    no-writes for a writing one and refuses it on a read-only replica,
    and a Peek, which writes nothing, is served by a replica during a
    failover (test_redis.py, test_faults.py); the flag
    allow-cross-slot-keys would only say what is already allowed;
  - each command inside must still touch one slot: an MGET of keys of two
    slots fails, hence one GET per key in such a call;
  - a key of a slot the node does not serve (another master's, or one
    being migrated and not here, or one being imported without ASKING)
    raises "ERR Script attempted to access a non local key in a cluster
    node" at the command that touches it: an error, not MOVED, and what
    the script wrote before it stays written. So every key is read before
    any is written: such a call then writes nothing, and permitd sends its
    items again, one call per slot (server/stores/redis_pipe.c,
    server/decisions/limiter.c), whose redirects are followed as usual.
  - all_or_nothing ("all") keeps its one-slot rule (limiter.c).
permitd checks everything else before the call: the policy exists and is
enabled, the app is in its `apps` (exact set membership, in C), the key is
well formed, the limits are valid (max_permits >= 1, rate > 0).

Answers one RECORD of 112 bytes per item, in order, as one string (the
layout every decision script of permitd answers): ten little-endian
doubles, struct.pack('<dddddddddd', status, allowed, remaining, limit,
retry_after_ms, reset_after_ms, window_s, level_micro, lease_expires_ms,
flags), then the 32 bytes of a lease id (32 "\0" bytes when none: always,
for a token bucket). A compact call's RECORD is its first 8 numbers
alone (64 bytes: lease_expires_ms and flags are 0 in a call without
request ids or lease ids, and so is the lease id): the two empty ARGV an
item and the 48 bytes an item fewer save Redis 1% of a lone Acquire, 4%
at nine a call, 10% of a batch's item (tests/bench/RESULTS-redis-cost.md). Every number is
whole, and exact below 2^53, where every policy permitd accepts stays;
server/stores/redis.c reads them (redis_answer_records(), the length by
the number of items asked). Answered as a table of integers they would cost
Redis ~650 instructions each and permitd a parse each. Reading no policy
hash, a lone Acquire cost Redis 79.9k instructions, 93.8k when it read one
(tests/bench/redis-cost.sh, issue 19).
status is 0 or a negated Connect code (server/core/status.h): -10
aborted ("all": another item was refused), -11 out_of_range (more permits
than the bucket holds; in "all", the items of one bucket together:
`remaining` is their total), -13 internal (a rate history that is not one
lua/sync.lua wrote), -15 data_loss (the bucket's state key holds a value
this script did not write; `remaining` is its size in bytes); or -17,
"stale", which is no Connect code: the bucket was last written under a
newer version of its policy than the one in ARGV (`remaining` is that
version stamp). Nothing is written for a stale item (in "all", for any
item); permitd reloads the policy from Redis and sends the call again, once,
so no bucket is ever decided under an older version than one it was
decided under. window_s is the seconds an empty bucket takes to fill (the
`w` of the RateLimit-Policy header), level_micro the tokens left in
millionths of a permit (for the admin UI's gauge), lease_expires_ms 0 (a
token bucket holds no leases). flags: bit 1 (1) replayed: the answer of an
earlier take with the same request id, nothing taken now; bit 2 (2) no-op
(a release or renew of a lease not held: concurrency only).

Request ids (issue 20, every decision script alike): on "take" and "all",
an item with a request id whose record key exists answers the RECORD kept
there with flags |= 1 and takes nothing (in "all" it is left out of the
batch's decision: the first call decided it); otherwise, once decided and
allowed, its RECORD is kept under the record key for ARGV[3] ms ("a retry
answers what the first call answered" for a take: it takes nothing
again). A denial keeps no record: it took nothing, so a retry decided
afresh takes at most once all the same, and an over-limit client with
fresh ids writes nothing (issue 42). The record key is
the item's state key .. "\x1f" .. "r" .. request id: no bucket key holds a
control character, so it meets no other key, and it shares the state key's
hash tag, so its slot. A record is 112 bytes of value. Only an allowed
status 0 answer is kept (an error is no answer to repeat: a stale item is asked
again). A "peek" ignores request ids.

The version stamp of a policy is id * 2^24 + version (id: its MySQL row
id, 0 for a policy kept by hand; version: the hash's `version`, which every
edit raises): a policy deleted and created again under the same name has a
new id, so its buckets are not "newer" than it. permitd computes it.

The bucket keeps sub-permit precision: its state is one 24-byte string,
three little-endian IEEE doubles (struct format '<ddd'): the tokens, the
Redis time in microseconds when they were measured (whole, and exact: 2^53
us is 285 years), and the version stamp of the policy it was last written
under. The bits go in and come back as they were, so no fraction of a
permit is ever lost, and a rate such as 1/min accrues exactly one permit
per minute. A 16-byte state (tokens and time: what permitd wrote before
issue 19) reads as written under version stamp 0. 24 bytes keep the value
one 48-byte embedded-string allocation in Redis, as 16 were. The clock is
Redis TIME: no client clock is trusted.

A rate edit re-prices nothing already earned: tokens accrue at the old
rate up to the edit and at the new one after it. lua/sync.lua, which writes
every policy, stamps an edit of `rate` with Redis TIME and keeps the rates
before the recent edits in the policy hash's field `rates`, newest first:
  rates = "<t1>:<rate before t1>;<t2>:<rate before t2>;..."  (t1 > t2 > ...)
t in Redis microseconds, each rate as the hash held it. permitd passes the
field along with the limits it belongs to. A bucket stamped
before t1 is first brought to t1 edit by edit (fold(): from its stamp to
t_k at the rate before t_k, ..., to t1 at the rate before t1), then accrues
at `rate` from t1: exact from the moment the edit is in force, on every
instance, whatever the settle pass below has or has not done yet. A bucket
stamped at or after t1 (every bucket written since the edit) costs one
number read off the front of `rates`; a policy whose history is empty
sends "" and costs nothing. Every segment is capped at the policy's
max_permits as it is now (a lowered max clamps; a bucket that reached the
old max before a raise held no key, and a missing key reads as the new
max): the history is one of rates only. It stays short: sync.lua drops an
entry once an empty bucket stamped before it would be full by now (no
bucket written before it can still be below full, and a full bucket has no
key), and once the settle pass has folded every bucket to now it drops
every entry up to the newest it saw (sync.c).

The bucket index (issues 22 and 41): the settle pass
(server/control/settle.c) must find a policy's buckets without a SCAN of
the whole keyspace, so each bucket this script creates (a write where the
key held no state: a take, a charge) is named in the policy's index. Its
home is a group list: the 16,384 slots are cut into 256 groups of 64
(group g: slots 64g .. 64g + 63), and group g of policy NAME keeps its
entries in the list P{T}il:NAME, T the tag of slot 64g (INDEX_TAGS below,
slot s at 3s + floor(s/64): a 3-character tag that hashes to s). An entry
is the bucket's key past its policy: KEY for P{NAME:KEY}:k, "\1" KEY for
P{NAME}:k:KEY, "\2" for P{NAME}:b. The list's elements are blobs of
entries, each blob "\n" and then its entries, each ended by "\n"
("\nuser-1\nuser-7\n"; an empty blob is "\n"), so an entry costs its
bytes and one (about 14.5 a bucket of a 12-byte key, all told), where a
field of a small hash cost its bytes and 4 and a set member the whole
key in a hash table (63-103). Which blob holds an entry is linear hashing
over the list's length L = 2^k + p (0 <= p < 2^k): an entry of hash h
(entry_hash()) is in blob h mod 2^k, or h mod 2^(k+1) when that is below
p. An add that takes a blob past INDEX_BLOB bytes splits blob p (its
entries whose h mod 2^(k+1) is p + 2^k move to a new blob pushed at the
list's end, L + 1), so a blob holds some 20-40 entries at 100 thousand
buckets and at 10 million alike, and a bucket created costs an LLEN, an
LINDEX and an LSET of a few hundred bytes (what an HSET into a hash of a
few hundred fields cost in time: a listpack lookup is a scan), and a
split now and then. A list's blobs are never taken out (their positions
are the hashing), only emptied; a list whose blobs are all empty goes
(the prune's sweep). The settle reads a group's LLEN, then its blobs with
LRANGE, a range at a time.

In a Redis Cluster, a script may touch any key of a slot its node serves
(see "Over several slots" above), and a group's list lives in slot 64g.
A bucket whose node does not serve slot 64g (a group cut by the masters'
slot ranges, a slot being migrated), or whose key is of none of the three
forms, whose KEY holds a control character or whose entry is longer than
INDEX_ENTRY_MAX, is named instead in the set P{T}ix:NAME of its own slot
(T that slot's tag), as every bucket was before issue 41: the settle reads
those sets too (and a permitd of before keeps writing them during a
rolling upgrade). Every index command is a redis.pcall: a failure costs the
bucket its index entry in the list (it goes to the set; the next index
build or the prune puts it back or drops it), never the decision.

Between the sets and the lists, a permitd kept the entries as fields of
small hashes P{T}ig:NAME:<i> ("k p" of the same hashing in P{T}ig:NAME):
the settle still reads them, and the prune's sweep moves their live
entries into the lists and deletes them.

The script computes where an entry goes from the bucket key (CRC16 of its
hash tag, as Redis does), so a call carries no more keys nor arguments for
it; an existing bucket costs nothing more. An entry whose bucket is gone
(full: no key) stays until something meets it: "settle" takes out the
entries of its keys that hold no state, mode "index" (KEYS: bucket keys;
ARGV[2] "0", ARGV[3] unused; no policy, no item) puts each key that exists
into the index (out of its slot's set, when it goes to a list) and takes
out each that does not, answering '<dd' {added, removed}: the index build
(buckets of a permitd from before the index: one SCAN per Redis) and the
prune of the sets use it. Mode "sweep" (KEYS: one list; ARGV[3] its first
blob to read, ARGV[4] "1" when the caller's sweeps of this list kept
nothing before) drops the entries of SWEEP_BLOBS blobs whose bucket holds
no key, answering '<ddd' {kept, removed, the next blob or 0 at the end};
given a hash of before, it moves the hash's live entries into the lists.
server/stores/policy.c builds the same names (policy_index_key(),
policy_index_group_key()) and turns entries back into keys
(policy_index_entry_key()); tests/unit/stores/test_policy.c checks the
tables agree.

A full bucket has no state key: every write sets the key to expire when
the bucket would be full again, and a missing key reads as full. A denied
request (and every Peek) writes nothing, save that a denial re-stamps a
state stamped ahead of the Redis clock (the clock stepped back). Items of
one call that share a bucket see each other's takes, as if sent one after
the other; each bucket is written once, at the end, under the version
stamp of the call.
]]

local mode = ARGV[1]
if mode ~= 'take' and mode ~= 'peek' and mode ~= 'all' and mode ~= 'settle' and
   mode ~= 'index' and mode ~= 'sweep' and mode ~= 'refund' and mode ~= 'charge' then
  if mode ~= 'hold' then
    -- never decided as a take (permitd sends no other; redis-cli might)
    return redis.error_reply('bucket.lua: mode "' .. tostring(mode) ..
                             '" is not one of take, peek, all, settle, index, sweep, refund, charge, hold')
  end
  -- @include hold.lua
end
local n = #KEYS
local np = ARGV[2] == '1' and 1 or tonumber(ARGV[2])  -- '1' nearly always: no strtod()
local ridttl = ARGV[3]  -- how long a take's answer is kept for its request id (ms)
local per = ridttl == '' and 2 or 4  -- ARGV an item: "" = compact (see the top)
local base = 4 + 4 * np  -- ARGV index of item 1's policy
local keys = KEYS
if mode ~= 'settle' and mode ~= 'index' and mode ~= 'sweep' and #ARGV - base + 1 > per * n then
  -- keys of several slots (see the top): the ones after KEYS follow the items
  local m = n
  n = (#ARGV - base + 1 + m) / (per + 1)
  keys = {}
  for i = 1, m do
    keys[i] = KEYS[i]
  end
  for i = m + 1, n do
    keys[i] = ARGV[base + per * n + i - m - 1]
  end
end
local find, sub, gmatch, format = string.find, string.sub, string.gmatch, string.format
local floor, ceil = math.floor, math.ceil
local pack, unpack_state = struct.pack, struct.unpack
local STATE = '<ddd'
local STALE = -17
-- One item's RECORD: 10 numbers, then its lease id, which a token bucket
-- never has (NOLEASE: a constant of the chunk, not built per call); in a
-- compact call the first 8 numbers alone (struct.pack ignores the rest).
local ANSWER = per == 4 and '<ddddddddddc32' or '<dddddddd'
local NOLEASE = '\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0'
local REPLAYED = 1            -- flags bit: an earlier take's answer

-- The bucket index's tables (see the top), generated: for each slot s a
-- tag of 3 characters of [0-9a-zA-Z] whose CRC16 is s (the first in the
-- order 0-9, a-z, A-Z, first character slowest), 64 to a line; and the
-- CRC16 (XMODEM) table, each entry two bytes (high, low) in decimal
-- escapes, on one line (one literal: a concatenation would run per call).
-- Constants of the chunk: not built per call.
local INDEX_TAGS = [[
06S2Gx5L54Iu4gY4601Y71LV0QG2dd7Ok4ji4DE65n2JH1oJ04b2EI7nF4KD4eh6PK2ke1Ng0Sv1V64914hX4Ft5C42Hy09R0210cX4Xv6mU6Cy42R0Mt1H421o1Pe5kK6NI74L4UF0nh3Kj2TJ0ai4ZG6od6AH40c0OE2zf1G50Bu5iz6Lx5R74Ww0lY0y8
5n34ks8YE31W2KR1nP71464t69D4Ho07I2Fb2hN1ML4fC7CAavs4iB0Rl2gO2Ic08H4Gn66EaUob4e05x108dPL8VD4dr5a24zp6OS20u3550or1j275Vbno4Yl6lO2Wa0bB0Ln2yM6Bc43H4xA6Mb22D0Co0mC3HA6cN4VmbanaDl1e314Z8GGdAO54941y
53t4641Y31LR06Wd9G5L14Iq4DA65j2JL1oN0QC30I7Oo4jm4el6PO2ka1Nc04f2EM7nBbqs4Fp5C0d6F09V0Sr1V2495bRoaio42V0Mp1H002517u4Xr6mQ74H4UB0nl3Kn21k1Pa5kO6NM6AL40g0OA2zb2TN0am4ZCaEr5R34Ws18tdcM1G10BqbClafn
2KV1nT5Uz64p5n74kw0PY0E82hJ1MH4fG6Sd7mi4Hk07M2Ff2Ig08L4Gj66A7LD4iF0Rh2gK0J91Oy4dv5a67oX4JZ0qt1t40ov1j64A94TX4zt6OW20q0AZ0Lj2yI6Bg43L4Yh6lK2We0bF0mG2Xd6cJ4Vi4xE6Mf2vH0Ck8GC3kY5p54uu5Kx4N81e71pV
0QO2dl7Oc4ja4DM65f3Za1oB0rS0g268Vb7F4gQ468dSo28527432t4994hPb8G67W0h309Z04j2EA7nN4KL51I6PC2km1No21g1Pm5kC6NA74D4UN8gx3Kb0290cPbbM79t4c342Z8DddBl23V8Ke4yS4l276u6350lQ0y02TB0aa4ZO6ol7Qa40k0OM2zn
69L4Hg07A2Fj2hF1MD4fK6Sh7Ny6K90PU0E42KZ1nX4EW4P67oT4JV05p1000J51Ou4dz6QY7LH4iJ0Rd2gG2Ik1li4Gf66M4Yd6lG2Wi0bJ0Lf2yE6Bk4wH4zxaeI0T70AV0oz2ZY4A54TT5Kt4N42UX14R0NW3kU54141q4xI6Mj22L0Cg0mK2Xh6cF4Ve
4DI65b2JD1oF0QK2dh7Og4je4gU4r42iX1LZ0rW0g65L94Iy4Fx5C80h71mw0Sz2fY7MV4hT4ed6PG2ki1Nk04n2EE7nJ4KH7pH4UJ0nd3Kf21c1Pi5kG6NE4c74vV0Mx1H80v50cT4Xz6mY6bX5GZ0lU0y41G90By4yW4l66AD40o0OI2zj2TF0ae4ZK6oh
2hB8Ty4fO6Sl69H4Hc07E2Fnd5e83m4ES4P2a0FbQL0PQ0E00J11Oq50Whbv7oP4JR05t1042Io08D4Gb66I7LL4iN1BA2gC0Lb2yA6Bo43D5IA6lC2Wm0bN8ffe4G4A14TPcPnaeM0T30AR0NS3kQ54541u5Kp4N0doo14V0mO2Xl6cB4Va4xM6Mn22H0Cc
04s1137nW4KU4ey6PZ0K61Nv0Sg2fD7MK4hI4Fe67N2Hh09C06B2Gi68O4Id4gH6Rk2iE1LG0QV0D75o84jx4DT4Q52JY82j1d80ax4ZV4O755240r0OT0Z523O0Bd4yJ6Li6bE4Wf0lH2Yk2Vj0cI4Xg6mD6Ch42C0Me2xF0U41Pt5kZ6NX7pU4UW0ny1k9
7LQ4iS26733w0i008Yb9D66T7oM4JO05i2DB2jn1Ol4dc7AaatS4kb0PL2eo2KC1nA4EN64e69Ub6E07X0f1dRl2964fR4s34xP4m122U8Jf0mR0x377v6265Km6no2UA14K0NN3kL7Pb41h4za6OB20d0AO0oc3Ja6an4TMbcN78w0w20bS8EgdCo4b043Y
51TazL0K21Nr04w1177nS4KQ4Fa67J2Hl09G0Sc32i7MO4hM4gL6Ro2iA1LC06F2Gm68K5YA4DP4Q1d4f82n0QR0D3a1EbPO55640v0OP0Z1dnl15U4ZR4O36bA4Wb0lL2Yo23K1RA4yN6Lm6Cl42G0Ma2xB2Vn0cM4Xc79i74Y4US8gedam0U01PpbALadN
0i41lt5WZ66P7LU4iW0Ry1W92jj1Oh4dg6QD7oI4JK05m2DF2KG1nE4EJ64a7Nd4kf0PH2ek1X81MY4fV4s769Q4Hz0sT0f50mV0x75S84Vx4xT4m522Q0Cz0NJ3kH7Pf41l5Ki6nk2UE14O0og2ZD6aj4TI4ze6OF2th0AK2l92yX4b44wU4Yy6lZ0w60bW
0So2fL7MC4hA4Fm67F3XA09K0ps1u3aTlb5f4eq6PRdQO8WG8XF30T5o04jp70765w1z21oS06J2Ga68G4Il53i6Rc2iM1LO23G0Bl4yB6La6bM4Wn18i2Yc1d00apc4DaEo5q240z8FDePm21v3465kR6NP74Ubol0nq1k12Vb0cA4Xo6mL7SA42K0Mm2xN
7oE4JG05a2DJ2jf1Od4dk6QH4825yz0Ru1W50i808Q4Gw5B75M64Hv07P0f91X41MU4fZ4737Nh4kj0PD2eg2KK1nI4EF64m5Ke6ng2UI14C0NF3kD7Pj4uh4xX4m91F60Cv0mZ2Xy5S44Vt4Yu6lV03216r0Lw1I74b843Q4zi6OJ20l0AG0ok2ZH6af4TE
4Fi67B2Hd09O0Sk2fH7MG4hE4eu6PV2kx1Nz0pw1u7aTh4KY4DX4Q91z61oW0QZ2dy5o44jt4gD6Rg2iI1LK06N2Ge68C4Ih6bI4Wj0lD2Yg23C0Bh4yF6Le5q64tv0OX0Z91d40at4ZZ6oy74Q5Ez0nu1k50U81Px5kV6NT6Cd42O0Mi2xJ2Vf0cE4Xk6mH
2jb8VY4do6QL7oA4JC05e2DNd7E08U4Gs5B3486bSl0Rq1W11X01MQ52w4775M24Hr07Td8D2KO1nM4EB64i7Nl4kn8YX2ec0NBdAR7Pn41d5Ka6nc2UM14G19wdbN5S04VpbBoagm1F20Cr0Ls1I3ahl43U4Yq6lR03616v0oo2ZL6ab4TA4zm6ON20h0AC
2VY0cz4XT4M557042p0MV0X721M1PG5ki6Nk74n4Ud0nJ3KH2Th0aK4Ze6oF6Aj40A0Og2zD0W60BW4yy5814B44WU18R2YX06q1317lU4IW53R6RX0I41Lt0Qe2dF7OI4jK4Dg65L2Jj1oh0pH2Ek7nd4Kf4eJ6Pi2kG1NE0ST0F57Mx4hz4FV4S71x809p
4zR4o320W8Hd0oP0z175t6044YN6lm2WC16I0LL2yo6BA43j4xcagR22f0CM0ma2XB6cl4VObaLaDN01814x8GedAm7PQ4uS7NS4kQ24531u0k21nrcoo64V69f4HM07k3Va2hl1Mn4fa6SB7Lb5yA0RN2gm2IA08j4GL66gaUMb4G05Z0d3dPn8Vf4dP459
57442t0MR0X3dln17W4XP4M174j5EA0nN3KL21I1PC5km6No6An40E0Oc3ja2Tl0aO4Za6oB4B04WQ18Vdco0W20BSbCN58553VaxN0I01Lp06u13568x4IS4Dc65H2Jn1ol0Qa2dB7OM4jO4eN6Pm2kC1NA04D2EoaTS4Kb4FR4S3d6d09t0SP0F1a3GbRM
0oT0z56aY4Tz4zV4o71D80Ax0LH2yk6BE43n4YJ6li2WG0bd0me2XF6ch4VK4xg6MD22b0CI0Ny1K97PU4uW5KZ6nX0u41pt0k61nv4Ey64R7NW4kU2412eX2hh1Mj4fe6SF69b4HI07o2FD2IE08n4GH66c7Lf4id0RJ2gi2jY8Vb4dT4q55O84Jx0qV0d7
21E1PO5ka6Nc74f4Ul0nB8631f20crbbo79V57842x395dBN23t3644yq58976Wbmn0ls1i33DA0aC4Zm6oN6Ab40I0Oo2zL0Qm2dN7OA4jC4Do65D2Jb82Q06y13968tb7d4gs5b3dSM8UE8ZD32V5m24hr72567u1x009x04H2Ec7nl4Kn4eB6Pa2kO1NM
4YF6le2WK0bh0LD2yg6BI43b4zZ6Oy1D40At0oX0z95Q64Tv5KV6nT01014p0Nu1K57PY41S4xk6MH22n0CE0mi2XJ6cd4VG69n4HE07c2FH2hd1Mf4fi6SJath4kY0Pw1U72Kx1nz4Eu6pV5O44Jt05R2Dy1Z61OW4dX4517Lj4ih0RF2ge2II08b4GD66o
74b4Uh0nF3KD21A1PK5ke6Ng5s44vt0MZ2xy1f60cv4XX4M94B84WY0lw1i723p1Rz4yu6LV6Af40M0Ok2zH2Td0aG4Zi6oJ4Dk6qH2Jf1od0Qi2dJ7OE4jG4gw5b70I81Lx0ru1w568p5Yz4FZ67q1x41mU0SX0F95m64hv4eF6Pe2kK1NI04L2Eg7nh4Kj
8EX2yc6BM43f4YB6la2WO0bl8fDe4e5Q24TrcPLaeo1D00Ap0Nq1K1ajn41W5KR6nP01414t0mm2XN77I4VC4xo6ML22j0CA3xA1Mb4fm6SN69j4HA07g2FLd5G83O4Eq64Za0dbQn0Ps1U31Z21OS50u4555O04Jp05Veno2IM08f5Wa66k7Ln4il0RB2ga
0030aZ4Zt6oW4a940P0Ov1J623m0BF4yh6LK6bg4WD0lj2YI2VH0ck4XE6mf6CJ42a0MG2xd1E71PV5kx4n85P54Uu8gC3KY04Q0e85N74Kw51r4422kV1NT0SE2ff7Mi4hk4FG67l2HJ09a0rh2GK68m4IF4gj6RI2ig1Le0Qt1T47OX4jZ4Dv5A60j91oy
4xr6MQ22w3770mp1h077Tblm5KO6nM2Uc14i0Nl3knajs41J4zCaer20F0Am0oA2Zb6aL4Tobcl78U1g10bq386dCM5r34ws5l14iq9Kf33U1y31lR73666v7oo4Jm05K3TA2jL1ON4dA6Qb7NBbQs0Pn2eM2Ka1nc4El64G69wb6g07z1v2dRN8TF4fp5c0
akm40T0Or1J200715w4Zp6oS6bc5Ga0ln2YM23i0BB4yl6LO6CN42e0MC3hA2VL0co4XA6mb5P14Uq8gGdaO1E31PRbAnadl51v4462kR1NP04Ueol5N34Ks4FC67h2HN09e0SA2fb7Mm4ho4gn6RM2ic1La06d2GO68i4IB4Dr5A2d4D82L0Qp1T0a1gbPm
0mt1h46cy4VZ4xv6MU0V90CX0Nh3kj7PD41N5KK6nI2Ug14m0oE2Zf6aH4Tk4zG6Od20B0Ai0LY0Y85r74ww5Iz6lx1g50bu1y71lV4GY4R85l54iu1Bz2gx2jH1OJ4dE6Qf7ok4Ji05O2Dd2Ke1ng4Eh64C7NF4kD0Pj2eI2hy3m94ft5c469s4HX0sv1v6
23e0BN5iA6LC6bo4WL0lb2YA0t30aRc4faEM4a140X8FfePO21T8Ig5kp4n074w6170nS3KQ3Fa0cc4XM6mn6CB42i0MO2xl0SM2fn7Ma4hc4FO67d2HB09i04Y0e0aTNb5D4eS4p2dQm8We25630v7OP4jRcnl65U0j11oq06h2GC68e4IN4gb6RA2io1Lm
5KG6nE2Uk14a0Nd3kf7PH41B4xz5920V50CT0mx1h84C74VV4YW4L61g90by0LU0Y456343s4zK6Oh20N0Ae0oI2Zj6aD4Tg7og4Je05C2Dh2jD1OF4dI6Qj5l94iy0RW0G62IX08s4GU4R47mV4HT07r1220H71Mw4fx5c87NJ4kH0Pf2eE2Ki1nk4Ed64O
6bk4WH0lf2YE23a0BJ4yd6LG4a54tT0Oz2zY0t70aV4ZxaEI5P94Uy0nW3KU21P1PZ5kt4n46CF42m0MK2xh2VD0cg4XI6mj4FK6sh2HF09m0SI2fj7Me4hg4eW4p62kZ1NX0pU0e47ny6k94Dz65Q0j51ou0Qx1T87OT4jV4gf6RE2ik1Li06l2GG68a4IJ
8Gx3kb7PL41F5KC6nA2Uo14e19Udbl4C34VRbBM5960V10CP0LQ0Y056743w4YS4L2dmm16T0oM2Zn75i4Tc4zO6Ol20J0Aa3za1OB4dM6Qn7oc4Ja05G2Dld7g08w4GQ4R0a2DbSN0RS0G20H31Ms52UayM7mR4HP07v1262Km1no5UA64K7NN4kL0Pb2eA
5nw4k724S0Ex0kT3NV6eY4Pz5Mk6hi2SG0fd0HH29c6FE47n48o6ID26b0GI0ie3Lg6gh4RK5OZ6jX0q40dU0Jy1O94d64qW4z44oU1DZ2aX0o60zW4Ay5D96yj4LI03o2BD2lh0YK4be6WF6XG4md0VJ2ci2ME0xf4CH62c5K84Nx0uV3PT2nY8Rb5pu4u5
dhn13W5Lq4I153446t0IR28y25I0Db5om6Jo6dC5AA0jN3OL2Pl0eOaT16kB6En44E0Kc3na0S20FS49uabL4F04SQ8agdgo02u1754X24MS57Va8F0M00XQ0Ua34k7KM4nO5PB61H2Nn1kl00D2Ao6zA4Ob4aN6Tm2oC1JA0WP0B1a7G58W4BR4W318484l
0kP3NR71t6445ns4k324W8Ld0HL29g6FA47j5Mo6hm2SC12I0ia3Lc6gl4RO48k7Ya26f0GM8CedEm4d24qSbeLhYw0580dQ0o20zScko60V4z04oQ20535u2ll0YO4ba6WB6yn4LM03k3Ra2MA0xb4CL62g6XC59I0VN2cmdTn8Rf54y419aQMb0G01Z3PP
53046p0IV3lT2RY0gz5Lu4I56dG4Qd0jJ3OH25M0Df5oi6Jk6Ej44A0Kg3ne2Ph0eK5ND6kF4F44SU1xZ3My0S60FW49q5x957R6VX0M40XU02q1714X64MW5PF61L2Nj1kh0Ue34o7KI4nK4aJ6Ti2oG0Zd0tH2Ak6zE4Of4BV4W71800yx0WT0B56YY4lz
5Mc6ha2SO0fl1Xa29k6FM47fbDmaao2pS0Ep8bDddL5U24Pr5OR5Z305410t0Jq1O1ann45W48g6IL26j0GA0im3Lo73I4RC6yb4LA03g2BL38I0YC4bm6WNa4dbUn0Ts1Q3d1G87O4Aq5D15K04Np01VdzN2nQ1KS54u4156XO4ml0VB2ca2MM0xn5Sa62k
25A0Dj5oe6Jg6dK4Qh0jF3OD1b60gv5Ly4I95w44rt0IZ28q27p1Vz5mT5x54F84SY0hw1m72Pd0eG5NH6kJ6Ef44M0Kk3ni0Ui34c7KE4nG5PJ6uH2Nf1kd0vu1s56xx7904cw5f70M80XY0WX0B95i64lv4BZ63q2LW0yt00L2Ag6zI4Oj4aF6Te2oK0Zh
0HD29o6FI47b5Mg6he2SK0fh0kX3NZ5U64Pv7N96Ky2pW0Et0Ju1O56Dx45S5OV5Z70500dY0ii3Lk6gd4RG48c6IH26n0GE2ld0YG4bi6WJ6yf4LE03c2BH2Ox1jz4Au5D54z84oY0Tw1Q72nU1KW54q4115K44Nt01R3PX2MI0xj4CD62o6XK4mh0VF2ce
6dO4Ql0jB82325E0Dn5oa6Jc53846x9Pg28u1b20grbfoaCm72Wbin0hs1m327t32449y5x16Eb44I0Ko3nmdjS0eC5NL6kN5PN61D2Nb86Q0Um34g7KA4nC4cs5f339W8QE02y179aRn79476563u1880yp9Ne36V5i24lr4aB6Ta2oO0Zl00H2Ac6zM4On
5lW5y60R90GX0it1l46gy4RZ5OK6jI2Qg0dD0Jh3oj6De45N5nf6Kd24B0Ei0kE3NG6eH4Pk5Mz6hx1c50fu0HY29r5v74sw5h54mu1Fz2cx2MT0xw4CY4V87kk4Ni01O3PE2nH1KJ54l6Uf6Zg4oD0Tj2aI2Oe0zF4Ah60C4Y94LX0wv1r62ly0YZ4bt5g4
04711w5NQ6kSaom44T0Kr1N227i0FB49d6HO6fc5Ca0hn3Ml2RL0gobfr6ib6GN46e0IC28h1A30DsbEnhyU5T14Qq8cGdeO00Uekl5J34Os55v4062oR0Zq0WA2bb6YL4lo4BC63h2LN0ym02d2CO6xa4MB4cn6VM2mc1Ha0Up1P0a5gbTm5PS5E2d0D86L
0ip1l073Tbhm48z5y226w3370Jl3on6Da45J5OO6jM2Qc10i0kA3NC6eL4Po5nbaar24F0Em8AE29v5v34ssbglaBn1c10fq2MP0xs77662v5h14mq9Of37U2nL1KN54h6Ub7ko4Nm01K3PA2Oa0zB4Al60G6ZcbUs0Tn2aM38T8PF4bp5g0aSm78703z1r2
4e944P0Kv1N60430eZ5NU6kW6fg4SD0hj3Mh27m0FF5mI6HK6GJ46a0IG28l2RH0gk5Ld6if5T54Qu1zz3OY1A70Dw5ox4j855r4022oV0Zu00Q0a85J74Ow4BG63l2LJ0yi0WE2bf6YH4lk4cj6VI2mg0XD0vh2CK6xe4MF5PW5E60n91ky0Ut1P47KX4nZ
5OC6jA2Qo0dL1ZA3ob6Dm45F48vacO0R10GP94Mdfl4G34RR5Mr4H2dim12T0HQ29z52747w5nn6Kl24J0Ea0kM3NO71i4Pc7kc4Na01G3PMdTs1KB54d6Una6D59T0VS0C219785o4CQ4V04Y14LP03v1660L30YR56Ua9E6Zo4oL0Tb2aA2Om0zN5QA60K
27a0FJ49l6HG6fk4SH0hf3Md0p70eV5NYaAI4e54pT0Kz3nx25P1TZ5ot4j45T94Qy0jW3OU2RD0gg5Lh6ij6GF46m0IK3lI0WI2bj6YD4lg4BK6wh2LF0ye0tU0a46zX6o94aW4t62oZ0Zy0Ux1P87KT4nVbzI61Q0n51ku02l2CG6xi4MJ4cf6VE2mk0XH
0Jd3of6Di45B5OG6jE2Qk0dH0ix1l84G74RV48r6IY0R50GT0HU3mW52347s5Mv4H61c90fy0kI3NK6eD4Pg5nj6Kh24N0Ee2nD1KF5ph6Uj7kg4Ne01C3PI1931hZ4CU4V45h94my0VW0C60L70YV4bx5g84Y54LT03r1622Oi0zJ4Ad60O6Zk4oH0Tf2aE
6fo4SL0hbdgr27e0FN49h6HC4e144X8BfdDn0p30eRbdOaAM70w6570jS3OQ25T8Mg5op4j06GB46i0IO28d3Ba0gc5Ll6in4BO63d2LB0ya0WM2bn7Ia4lc4aS4t2dUm8Se00Y0a0aPNb1DbzM61U0n11kq21634v7KP4nR4cb6VA2mo0XL02h2CC6xm4MN
5j74ow0TY0A82OV0zu5Qz60p6yH4Lk03M2Bf2lJ0Yi4bG6Wd6Xe4mF0Vh2cK2Mg0xD4Cj62A7kX4NZ0ut1p40N91Ky5pW5e65nU6KW24q0EZ0kv1n64E94PX5MI6hK2Se0fF0Hj29A6Fg47L48M6If2rH0Gk0iG3LE6gJ4Ri5Ox4J81a70dw1Zz3oY5t54qu
02WdyO5H14Mq57t4242mP0Xs0UC34I7Ko4nmbzr61j2NL1kN00f2AM6zcbus4al6TO2oa0ZB0Wr1R2a7e58u4Bp5G0d2F84N06513u5LS5Y2amo46V0Ip1L025k1Ta5oO6JM6da4QB0jl3On2PN0em5NbaAr6EL44g0KA3nC1C10Fq49Wabn5V34Ss8aE094
2OR0zq75460t5j34os9Md35W2lN0Ym4bC7GA6yL4Lo03I2Bb2Mc1ha4Cn62E6Xa4mB0Vl2cOdTL8RD5pS5e2aQob0e01x1480kr1n271Vbjo5nQ6KS24u3150Hn29E6Fc47H5MM6hO2Sa0fB0iC3LA6gN4Rm48I6Ib26D0Go8CGdEO50945ybenhYU1a30ds
4cY4202mT0Xw02S2Cx5H54Mu5Pd61n2NH1kJ0UG34M7Kk4ni4ah6TK2oe0ZF00b2AI6zg4OD4Bt5G42Ly0yZ0Wv1R64y94lX6Gy46R0It1L40610gX5LW5Y66de4QF0jh3Oj25o0DD5oK6JI6EH44c0KE3nG2PJ0ei5Nf6kd5V74Sw0hY0901C50Fu49S6Hx
7ia4Lc03E2Bn2lB0Ya4bO6Wla4FbUL0TQ0A0d1e87m4AS4T27kP4NR01t1440N11Kq54Whfv6Xm4mN1FA2cC2Mo0xL4Cb62I5MA6hC2Sm0fN0Hb29I6Fo47DbDOaaM0P30ER8bfddn4E14PP5Op4J0dko10V0JS3oQ50545u48E6In26H0Gc0iO3LM6gB4Ra
0UK34A7Kg4ne5Ph61b2ND1kF0vW0c65H94My4cU4v42mX1HZ0Wz2bY4y54lT4Bx5G80l70yV00n2AE6zk4OH4ad6TG2oi0ZJ25c0DH5oG6JE6di4QJ0jd3Of0r50gT6806iY4g74rV0Ix1L81C90Fy5mv4h66fX5CZ0hU3MW2PF0ee5Nj6kh6ED44o0KI3nK
2lF0Ye4bK6Wh6yD4Lg03A2Bj2OZ0zy4AW4T66ZX6O90TU0A40N51Ku54S6UY7kT4NV01p1402Mk0xH4Cf62M6Xi4mJ0Vd2cG0Hf29M6Fk4sH5ME6hG2Si0fJ0kz3Nx4E54PT5nYaaI0P70EV0JW3oU50145q5Ot4J42QX10R0iK3LI6gF4Re48A6Ij26L0Gg
5Pl61f9331kB0UO34E7Kc4na4cQ42839u8Qg0vS0c2aRLb3FbxO63W0l30yR23436t4y14lP55I6TC2om0ZN00j2AA6zo4OL6dm4QN1zA3Ob25g0DL5oC6JA4g346Z9PE28W0690gP684aCO72u6750hQ09827V8Oe5mr4h27Ua44k0KM3nO2PB0ea5Nn6kl
4x64mW0Vy1S90m40xU5SZ62P7kI4NK01m3Pg2nj1Kh54N6UD6ZE4of0TH2ak2OG0zd4AJ60a6yY4Lz0wT0b538r0Yx4bV4w75lu4i526Q0Gz0iV3LT5W84Rx5Oi6jk2QE0df0JJ3oH6DG45l5nD6KF2ph0EK0kg3Ne6ej4PI5MX5X90s60fW1XZ29P4f44sU
00w1574Z04OQ55Thgu0O20ZS0Wc36i6Yn4lM4Ba63J2Ll0yO02F2Cm6xCaG04cL6Vo2mA0Xb0UR34Xa5EbTO5Pq4U1d0f86ndjl11U5Ns4K351644v0KP3nR27K1VA49F6Hm6fA4Sb0hL3MN2Rn0gM5LB7ya6Gl46G0Ia28J0Q00DQbELhyw4D24QS8cedem
0m00xQbyL62T4x24mS22737w2nn1Kl54J7Ea7kM4NO01i3Pc2OC1jA4AN60e6ZA4ob0TL2ao38v8Pd4bR4w3aSOb2E03X0b10iR3LP73v66648X4i126U8Nf0JN3oL6DC45h5Om6jo2QA0db0kc3Na6en4PMa096KB24d0EO8Ag29T4f047Y697aBL0s20fS
4ay5d90O60ZW00s1534Z44OU4Be63N2Lh0yK0Wg2bD6Yj4lI4cH6Vk2mE0Xf02B2Ci6xG4Md5Pu4U52NY86j0UV3pT5k84nx51244r0KT3nVdjh0ex5Nw4K76fE4Sf0hH3MJ27O0Fd49B6Hi6Gh46C0Ie28N2Rj0gI5LF6iD4D64QW0jy1o90Q40DU5oZ6JX
7kA4NC01e3Po2nb8RY54F6ULa6f59v0Vq1S1d3E85M4Cs5F35I24Lr03TdxL2lS0Yp56w4376ZM4on1Da2ac2OO0zl4AB60i5Oa6jc2QM0dn0JBdER6DO45d48Tacm1B20Gr94o0875W04Rp5MP5X107612v0Hs1M3all47U5nL6KN24h0EC0ko3Nm6eb4PA
0Wk2bH6Yf4lE4Bi63B2Ld0yG0tw1q74Z84OY4au5d52ox1Jz0UZ34P5k44nt5Py4U92NU1kW02N2Ce6xK4Mh4cD6Vg2mI0Xj27C0Fh49N6He6fI4Sj0hD3MF2PW0et7n96ky5u64pv0KX3nZ0Q80DY5oV5z76dx5Az0ju1o52Rf0gE5LJ6iH6Gd46O0Ii28B
2nf1Kd54B6UH7kE4NG01a3Pk0m80xY4Cw5F76Xx59r0Vu1S52lW0Yt4bZ4335I64Lv03P0b92OK0zh4AF60m6ZI4oj0TD2ag0JF3oD6DK4qh5Oe6jg2QI0dj0iZ0835W44Rt48P4i91B60Gv0Hw1M74f847Q5MT5X507212r0kk3Ni6ef4PE5nH6KJ24l0EG
4Bm63FdvS0yC0Wo2bL6Yb4lA4aq5d1dUO8SG0ts1q3aPlb1f74761w2NQ1kS9Lg34T5k04np57i6Vc2mM0Xn02J2Ca6xO4Ml6fM4Sn1xa3MB27G0Fl49J6Ha5u244z8BDdDL2PS0epbdmaAo70Ubkl0jq1o125v3065oR5z37WA46K0Im28F2Rb0gA5LN6iL
0cY0206mT4Xw42S6Cx1H50Mu1Pd21n6NH5kJ4UG74M3Kk0ni0ah2TK6oe4ZF40b6AI2zg0OD0Bt1G46Ly4yZ4Wv5R60y90lX2Gy06R4It5L44614gX1LW1Y62de0QF4jh7Oj65o4DD1oK2JI2EH04c4KE7nG6PJ4ei1Nf2kd1V70Sw4hY4905C54Fu09S2Hx
6OR4zq35420t1j30osbnn75W6lN4Ym0bC3GA2yL0Lo43I6Bb6Mc5ha0Cn22E2Xa0mB4Vl6cOaDmbao1pS1e2dAN8GF41x5484kr5n231V8YD1nQ2KS64u7154Hn69E2Fc07H1MM2hO6Sa4fB4iC7LA2gN0Rm08I2Ib66D4Gob4daUn10905y8VEdPM5a34ds
42Wain1H10Mq17t0246mP4Xs4UC74I3Ko0nm8IY21j6NL5kN40f6AM2zc8FX0al2TO6oa4ZB4Wr5R2dcL18u0Bp1G0afobCm46553u1LS1Y2d9F06V4Ip5L065k5Ta1oO2JM2da0QB4jl7On6PN4em1NbdQS2EL04g4KA7nC5C14Fq09Wd6G1V30SsbRn494
1j70ow4TY4A86OV4zu1Qz20p2yH0Lk43M6Bf6lJ4Yi0bG2Wd2Xe0mF4Vh6cK6Mg4xD0Cj22A3kX0NZ4ut5p44N95Ky1pW1e61nU2KW64q4EZ4kv5n60E90PX1MI2hK6Se4fF4Hj69A2Fg07L08M2If6rH4Gk4iG7LE2gJ0Ri1Ox0J85a74dw5Zz7oY1t50qu
1Pl21fadR5kB4UO74E3Kc0na0cQ02879ubbL4vS4c2dBm8De8Kd23W4l34yR63476t0y10lP15I2TC6om4ZN40j6AA2zo0OL2dm0QN5zA7Ob65g4DL1oC2JA0g306Zb7G68W4694gP284dSn32u2754hQ49867Vb8F1mr0h23Ua04k4KM7nO6PB4ea1Nn2kl
6lF4Ye0bK2Wh2yD0Lg43A6Bj6OZ4zy0AW0T62ZX2O94TU4A44N55Ku14S2UY3kT0NV41p5406Mk4xH0Cf22M2Xi0mJ4Vd6cG4Hf69M2Fk0sH1ME2hG6Si4fJ4kz7Nx0E50PT1nYdqh4P74EV4JW7oU10105q1Ot0J46QX50R4iK7LI2gF0Re08A2Ij66L4Gg
4UK74A3Kg0ne1Ph21b6ND5kF4vW4c61H90My0cU0v46mX5HZ4Wz6bY0y50lT0Bx1G84l74yV40n6AE2zk0OH0ad2TG6oi4ZJ65c4DH1oG2JE2di0QJ4jd7Of4r54gT2802iY0g70rV4Ix5L85C94Fy1mv0h62fX1CZ4hU7MW6PF4ee1Nj2kh2ED04o4KI7nK
3ia0Lc43E6Bn6lB4Ya0bO2Wle4F8fg4TQ4A0aeLcPo0AS0T23kP0NR41t5444N15Kq14Wdon2Xm0mN5FA6cC6Mo4xL0Cb22I1MA2hC6Sm4fN4Hb69I2Fo07D83ld5d4P34ERbQMa0G0E10PP1Op0J0hbw50V4JS7oQ10505u08E2In66H4Gc4iO7LM2gB0Ra
0ay1d94O64ZW40s5530Z40OU0Be23N6Lh4yK4Wg6bD2Yj0lI0cH2Vk6mE4Xf42B6Ci2xG0Md1Pu0U56NYbAI4UV7pT1k80nx11204r4KT7nVazI4ex1Nw0K72fE0Sf4hH7MJ67O4Fd09B2Hi2Gh06C4Ie68N6Rj4gI1LF2iD0D60QW4jy5o94Q44DU1oZ2JX
4m04xQ8Jg22T0x20mS62777w6nn5Kl14J3Ea3kM0NO41i7Pc6OC5jA0AN20e2ZA0ob4TL6ao78vbcO0bR0w3dCn8Ef43X4b14iR7LP33v26608X0i166Ub9E4JN7oL2DC05h1Om2jo6QA4db4kc7Na2en0PM83q2KB64d4EOb6D69T0f007Y297dRm4s24fS
40w5570Z00OQ15Tdnm4O24ZS4Wc76i2Yn0lM0Ba23J6Ll4yO42F6Cm2xC8Dx0cL2Vo6mA4Xb4UR74Xdal8gd1Pq0U1adObAMazM51U1Ns0K311604v4KP7nR67K5VA09F2Hm2fA0Sb4hL7MN6Rn4gM1LB3ya2Gl06G4Ia68J4Q04DQ82od4g0D20QSbPNa1D
0x60mW4Vy5S94m44xU1SZ22P3kI0NK41m7Pg6nj5Kh14N2UD2ZE0of4TH6ak6OG4zd0AJ20a2yY0Lz4wT4b578r4Yx0bV0w71lu0i566Q4Gz4iV7LT1W80Rx1Oi2jk6QE4df4JJ7oH2DG05l1nD2KF6ph4EK4kg7Ne2ej0PI1MX1X94s64fW5XZ69P0f40sU
0Bm23Fafr4yC4Wo6bL2Yb0lA0aq1d1aEnc4E4ts5q3ePl8FE34721w6NQ5kSbom74T1k00np17i2Vc6mM4Xn42J6Ca2xO0Ml2fM0Sn5xa7MB67G4Fl09J2Ha1u204zb5gaTm6PS4ep8WFdQN30U8XG4jq5o165v7061oR1z33WA06K4Im68F6Rb4gA1LN2iL
6nf5Kd14B2UH3kE0NG41a7Pk4m84xY0Cw1F72Xx19r4Vu5S56lW4Yt0bZ0331I60Lv43P4b96OK4zh0AF20m2ZI0oj4TD6ag4JF7oD2DK0qh1Oe2jg6QI4dj4iZ4831W40Rt08P0i95B64Gv4Hw5M70f807Q1MT1X547252r4kk7Ni2ef0PE1nH2KJ64l4EG
4Wk6bH2Yf0lE0Bi23B6Ld4yG4tw5q70Z80OY0au1d56ox5Jz4UZ74P1k40nt1Py0U96NU5kW42N6Ce2xK0Mh0cD2Vg6mI4Xj67C4Fh09N2He2fI0Sj4hD7MF6PW4et3n92ky1u60pv4KX7nZ4Q84DY1oV1z72dx1Az4ju5o56Rf4gE1LJ2iH2Gd06O4Ii68B
3kA0NC41e7Po6nbbar14F2ULdbO19v4Vq5S1aglbBn0Cs1F31I20Lr43Tahm6lS4Yp16w0372ZM0on5Da6ac6OO4zl0AB20i1Oa2jc6QM4dn4JBaUs2DO05d08Td7D5B24GrbSm4871W00Rp1MP1X147652v4Hs5M3d8E07U1nL2KN64h4EC4ko7Nm2eb0PA
13006p4IV7lT6RY4gz1Lu0I52dG0Qd4jJ7OH65M4Df1oi2Jk2Ej04A4Kg7ne6Ph4eK1ND2kF0F40SU5xZ7My4S64FW09q1x917R2VX4M44XU42q5710X60MW1PF21L6Nj5kh4Ue74o3KI0nK0aJ2Ti6oG4Zd4tH6Ak2zE0Of0BV0W75804yx4WT4B52YY0lz
4kP7NR31t2441ns0k364Wcon4HL69g2FA07j1Mo2hm6SC52I4ia7Lc2gl0RO08k3Ya66f4GMb4FaUL0d20qS8VgdPo4584dQ4o24zS8He20V0z00oQ60575u6ll4YO0ba2WB2yn0LM43k7Ra6MA4xb0CL22g2XC19I4VN6cmaDObaM14y019dAl8Gd41Z7PP
axO53W1Lq0I113406t4IR68y65I4Db1om2Jo2dC1AA4jN7OL6Pl4eO8Wy2kB2En04E4Kc7na4S24FS09ud6e0F00SQbRLa3F42u5750X20MS17Vdlo4M04XQ4Ua74k3KM0nO1PB21H6Nn5kl40D6Ao2zA0Ob0aN2Tm6oC5JA4WP4B1dcn18W0BR0W3584bCO
1nw0k764S4Ex4kT7NV2eY0Pz1Mk2hi6SG4fd4HH69c2FE07n08o2ID66b4GI4ie7Lg2gh0RK1OZ2jX4q44dU4Jy5O90d60qW0z40oU5DZ6aX4o64zW0Ay1D92yj0LI43o6BD6lh4YK0be2WF2XG0md4VJ6ci6ME4xf0CH22c1K80Nx4uV7PT6nYbaI1pu0u5
2dO0Ql4jBaus65E4Dn1oa2Jc13806xb7e68u5b24gr8UDdSL32W8ZE4hs5m367t72409y1x12Eb04I4Ko7nmazr4eC1NL2kN1PN21D6NbbAr4Um74g3KA0nC0cs1f379Wbbn42y579dBO39436523u5884ypbmo76V1i20lr0aB2Ta6oO4Zl40H6Ac2zM0On
4HD69o2FI07b1Mg2he6SK4fh4kX7NZ1U60Pv3N92Ky6pW4Et4Ju5O52Dx05S1OV1Z74504dY4ii7Lk2gd0RG08c2IH66n4GE6ld4YG0bi2WJ2yf0LE43c6BH6Ox5jz0Au1D50z80oY4Tw5Q76nU5KW14q0111K40Nt41R7PX6MI4xj0CD22o2XK0mh4VF6ce
65A4Dj1oe2Jg2dK0Qh4jF7OD5b64gv1Ly0I91w40rt4IZ68q67p5Vz1mT1x50F80SY4hw5m76Pd4eG1NH2kJ2Ef04M4Kk7ni4Ui74c3KE0nG1PJ2uH6Nf5kd4vu5s52xx3900cw1f74M84XY4WX4B91i60lv0BZ23q6LW4yt40L6Ag2zI0Oj0aF2Te6oK4Zh
1Mc2ha6SO4fl5Xa69k2FM07f83Nd5F6pS4EpbQoa0e1U20Pr1OR1Z345450t4Jq5O1enn05W08g2IL66j4GA4im7Lo33I0RC2yb0LA43g6BL78I4YC0bm2WNe4d8fE4Ts5Q3aencPM0Aq1D11K00Np41Vajo6nQ5KS14u0152XO0ml4VB6ca6MM4xn1Sa22k
0e904P4Kv5N64434eZ1NU2kW2fg0SD4hj7Mh67m4FF1mI2HK2GJ06a4IG68l6RH4gk1Ld2if1T50Qu5zz7OY5A74Dw1ox0j815r0026oV4Zu40Q4a81J70Ow0BG23l6LJ4yi4WE6bf2YH0lk0cj2VI6mg4XD4vh6CK2xe0MF1PW1E64n95ky4Ut5P43KX0nZ
4ip5l033T9Kg08z1y266w7374Jl7on2Da05J1OO2jM6Qc50i4kA7NC2eL0Po1nbdqS64F4Emb6f69v1v30ss8TGdRO5c14fq6MP4xs37622v1h10mqbll77U6nL5KN14h2Ub3ko0Nm41K7PA6Oa4zB0Al20G2Zc8fX4Tn6aM78Tbcm0bp1g0dCL38743z5r2
44751w1NQ2kSeom04T4Kr5N267i4FB09d2HO2fc1Ca4hn7Ml6RL4go8UY2ib2GN06e4IC68h5A34Ds82Md4E1T10QqbPla1f40Uakl1J30Os15v0066oR4Zq4WA6bb2YL0lo0BC23h6LN4ym42d6CO2xa0MB0cn2VM6mc5Ha4Up5P0daN8gF1PS1E2admbAo
1lW1y64R94GX4it5l42gy0RZ1OK2jI6Qg4dD4Jh7oj2De05N1nf2Kd64B4Ei4kE7NG2eH0Pk1Mz2hx5c54fu4HY69r1v70sw1h50mu5Fz6cx6MT4xw0CY0V83kk0Ni41O7PE6nH5KJ14l2Uf2Zg0oD4Tj6aI6Oe4zF0Ah20C0Y90LX4wv5r66ly4YZ0bt1g4
2fo0SL4hbawS67e4FN09h2HC0e104Xb5EaTO4p34eR8WddQl30w2574jS7OQ65Tcnm1op0j02GB06i4IO68d7Ba4gc1Ll2in0BO23d6LB4ya4WM6bn3Ia0lc0aS0t2aELc4g40Y4a0ePN8Fg8If21U4n15kq61674v3KP0nR0cb2VA6mo4XL42h6CC2xm0MN
4Jd7of2Di05B1OG2jE6Qk4dH4ix5l80G70RV08r2IY4R54GT4HU7mW12307s1Mv0H65c94fy4kI7NK2eD0Pg1nj2Kh64N4Ee6nD5KF1ph2Uj3kg0Ne41C7PI5935hZ0CU0V41h90my4VW4C64L74YV0bx1g80Y50LT43r5626Oi4zJ0Ad20O2Zk0oH4Tf6aE
67a4FJ09l2HG2fk0SH4hf7Md4p74eV1NYdQh0e50pT4Kz7nx65P5TZ1ot0j41T90Qy4jW7OU6RD4gg1Lh2ij2GF06m4IK7lI4WI6bj2YD0lg0BK2wh6LF4ye4tU4a42zX2o90aW0t66oZ4Zy4Ux5P83KT0nV8Ib21Q4n55ku42l6CG2xi0MJ0cf2VE6mk4XH
1OC2jA6Qo4dL5ZA7ob2Dm05F08vd7f4R14GPbSOa2E0G30RR1Mr0H2ayL52T4HQ69z12707w1nn2Kl64J4Ea4kM7NO31i0Pc3kc0Na41G7PMaDR5KB14d2Undbm19T4VS4C2597bBL0CQ0V00Y10LP43v5664L34YR16Udml2Zo0oL4Tb6aA6Om4zN1QA20K
4oT4z52aY0Tz0zV0o75D84Ax4LH6yk2BE03n0YJ2li6WG4bd4me6XF2ch0VK0xg2MD62b4CI4Ny5K93PU0uW1KZ2nX4u45pt4k65nv0Ey24R3NW0kU6416eX6hh5Mj0fe2SF29b0HI47o6FD6IE48n0GH26c3Lf0id4RJ6gi6jYbeI0dT0q51O80Jx4qV4d7
17402t4MR4X3a8G57W0XP0M134j1EA4nN7KL61I5PC1km2No2An00E4Oc7ja6Tl4aO0Za2oB0B00WQ58Va7F4W24BS84m18513Vdho4I05Lp46u53528x0IS0Dc25H6Jn5ol4Qa6dB3OM0jO0eN2Pm6kC5NA44D6EodDr0Kb0FR0S3abM49t4SP4F1dgn8af
0zR0o360Wckn4oP4z135t2040YN2lm6WC56I4LL6yo2BA03j0xc90362f4CM4ma6XB2cl0VO8RgdTo41854xb0FaQL3PQ0uS3NS0kQ64571u4k25nr8Le24V29f0HM47k7Va6hl5Mn0fa2SB3Lb1yA4RN6gm6IA48j0GL26gdEl8Cd45Z4d3hYvbeM0dP059
6VY4cz0XT0M517002p4MV4X761M5PG1ki2Nk34n0Ud4nJ7KH6Th4aK0Ze2oF2Aj00A4Og6zD4W64BW0yy1810B40WU58R6YX46q5313lU0IW13R2RX4I45Lt4Qe6dF3OI0jK0Dg25L6Jj5oh4pH6Ek3nd0Kf0eJ2Pi6kG5NE4ST4F53Mx0hz0FV0S75x849p
bvs6yc2BM03f0YB2la6WO4blbUoa4e1Q20Tr87Nd1F5D04Ap4Nq5K1dzO01W1KR2nP41454t4mm6XN37I0VC0xo2ML62j4CA7xA5Mb0fm2SN29j0HA47g6FLaanbDl0Eq24ZddM8bE4Ps5U35Z25OS10u0551O00Jp45Vano6IM48f1Wa26k3Ln0il4RB6ga
34b0Uh4nF7KD61A5PK1ke2Ng1s40vt4MZ6xy5f64cv0XX0M90B80WY4lw5i763p5Rz0yu2LV2Af00M4Ok6zH6Td4aG0Zi2oJ0Dk2qH6Jf5od4Qi6dJ3OE0jG0gw1b74I85Lx4ru5w528p1Yz0FZ27q5x45mU4SX4F91m60hv0eF2Pe6kK5NI44L6Eg3nh0Kj
0YF2le6WK4bh4LD6yg2BI03b0zZ2Oy5D44At4oX4z91Q60Tv1KV2nT41054p4Nu5K53PY01S0xk2MH62n4CE4mi6XJ2cd0VG29n0HE47c6FH6hd5Mf0fi2SJddI0kY4Pw5U76Kx5nz0Eu2pV1O40Jt45R6Dy5Z65OW0dX0513Lj0ih4RF6ge6II48b0GD26o
61E5PO1ka2Nc34f0Ul4nBaqs5f24cr8QD39V17802x795aRo63t7640yq18936W9Nd4ls5i37DA4aC0Zm2oN2Ab00I4Oo6zL4Qm6dN3OA0jC0Do25D6JbbEr46y53928t9Pf0gs1b3aClbfnbio72V1m20hr32527u5x049x44H6Ec3nl0Kn0eB2Pa6kO5NM
4mt5h42cy0VZ0xv2MU4V94CX4Nh7kj3PD01N1KK2nI6Ug54m4oE6Zf2aH0Tk0zG2Od60B4Ai4LY4Y81r70ww1Iz2lx5g54bu5y75lV0GY0R81l50iu5Bz6gx6jH5OJ0dE2Qf3ok0Ji45O6Dd6Ke5ng0Eh24C3NF0kD4Pj6eI6hy7m90ft1c429s0HX4sv5v6
ekm00T4Or5J240755w0Zp2oS2bc1Ga4ln6YM63i4BB0yl2LO2CN02e4MC7hA6VL4co0XA2mb1P10UqbTla5f5E35PR86Md0E11v0466kR5NP44Uaol1N30Ks0FC27h6HN49e4SA6fb3Mm0ho0gn2RM6ic5La46d6GO28i0IB0Dr1A2hyTbEo4Qp5T0deN8cF
0xr2MQ62w7774mp5h037T9Og1KO2nM6Uc54i4Nl7kndzR01J0zCduS60F4Am4oA6Zb2aL0To8PG38U5g14bq786aSl1r30ws1l10iqbhl73U5y35lR33626v3oo0Jm45K7TA6jL5ON0dA2Qb3NB8bX4Pn6eM6Ka5nc0El24G29w8AD47z5v2aBobgm0fp1c0
4034aZ0Zt2oW0a900P4Ov5J663m4BF0yh2LK2bg0WD4lj6YI6VH4ck0XE2mf2CJ02a4MG6xd5E75PV1kx0n81P50UubTh7KY44Q4e81N70Kw11r0426kV5NT4SE6ff3Mi0hk0FG27l6HJ49a4rh6GK28m0IF0gj2RI6ig5Le4Qt5T43OX0jZ0Dv1A64j95oy
aD07kb3PL01F1KC2nA6Uo54e59Ua6E0C30VR85n1964V14CP4LQ4Y016703w0YS0L2a9D56T4oM6Zn35i0Tc0zO2Ol60J4Aa7za5OB0dM2Qn3oc0Ja45G6DlacN48w0GQ0R0dfm94L4RS4G24H35Ms12Udil3mR0HP47v5266Km5no1UA24K3NN0kL4Pb6eA
2bk0WH4lf6YE63a4BJ0yd2LG0a50tT4Oz6zY4t74aV0ZxdUh1P90Uy4nW7KU61P5PZ1kt0n42CF02m4MK6xh6VD4cg0XI2mj0FK2sh6HF49m4SI6fj3Me0hg0eW0p66kZ5NX4pU4e43ny2k90Dz25Q4j55ou4Qx5T83OT0jV0gf2RE6ik5Li46l6GG28a0IJ
1KG2nE6Uk54a4Nd7kf3PH01B0xz1924V54CT4mx5h80C70VV0YW0L65g94by4LU4Y416303s0zK2Oh60N4Ae4oI6Zj2aD0Tg3og0Je45C6Dh6jD5OF0dI2Qj1l90iy4RW4G66IX48s0GU0R43mV0HT47r5224H75Mw0fx1c83NJ0kH4Pf6eE6Ki5nk0Ed24O
63e4BN1iA2LC2bo0WL4lb6YA4t34aR8SddUl0a100Xb1EaPO61TbzL1kp0n034w2174nS7KQ7Fa4cc0XM2mn2CB02i4MO6xl4SM6fn3Ma0hc0FO27d6HB49i44Y4e0dDo8Bg0eS0p2aALbdN65670v3OP0jR8Mf25U4j15oq46h6GC28e0IN0gb2RA6io5Lm
6KV5nT1Uz24p1n70kw4PY4E86hJ5MH0fG2Sd3mi0Hk47M6Ff6Ig48L0Gj26A3LD0iF4Rh6gK4J95Oy0dv1a63oX0JZ4qt5t44ov5j60A90TX0zt2OW60q4AZ4Lj6yI2Bg03L0Yh2lK6We4bF4mG6Xd2cJ0Vi0xE2Mf6vH4Ckbth7kY1p50uu1Kx0N85e75pV
13t0645Y35LR46Wamn1L10Iq0DA25j6JL5oN4QC70I3Oo0jm0el2PO6ka5Nc44f6EM3nB8BX0Fp1C0abo49V4Sr5V20958aDdyN02V4Mp5H042557u0Xr2mQ34H0UB4nl7Kn61k5Pa1kO2NM2AL00g4OA6zb6TN4am0ZCdUS1R30Ws58ta7d5G14Bq84Od2G
1n30ksbjn71W6KR5nP31424t29D0Ho47I6Fb6hN5ML0fC3CA8130iB4Rl6gO6Ic48H0Gn26EdEN8CF45x508hYTbeo0dr1a20zp2OS60u7554or5j235V9Me0Yl2lO6Wa4bB4Ln6yM2Bc03H0xA2Mb62D4Co4mC7HA2cN0Vm8REdTM5e354Zb0daQn14901y
46S6Gx1L50Iu0gY0605Y75LV4QG6dd3Ok0ji0DE25n6JH5oJ44b6EI3nF0KD0eh2PK6ke5Ng4Sv5V60910hX0Ft1C46Hy49R4214cX0Xv2mU2Cy02R4Mt5H461o5Pe1kK2NI34L0UF4nh7Kj6TJ4ai0ZG2od2AH00c4OE6zf5G54Bu1iz2Lx1R70Ww4lY4y8
6hBaW10fO2Sl29H0Hc47E6FnaaLbDN0ES0P2ddo8bg4PQ4E04J15Oq10Wdkn3oP0JR45t5046Io48D0Gb26I3LL0iN5BA6gC4Lb6yA2Bo03D1IA2lC6Wm4bNbUMa4G0A10TP87ld1d4T34AR4NS7kQ14501u1Kp0N0hfw54V4mO6Xl2cB0Va0xM2Mn62H4Cc
0DI25b6JD5oF4QK6dh3Og0je0gU0r46iX5LZ4rW4g61L90Iy0Fx1C84h75mw4Sz6fY3MV0hT0ed2PG6ki5Nk44n6EE3nJ0KH3pH0UJ4nd7Kf61c5Pi1kG2NE0c70vV4Mx5H84v54cT0Xz2mY2bX1GZ4lU4y45G94By0yW0l62AD00o4OI6zj6TF4ae0ZK2oh
29L0Hg47A6Fj6hF5MD0fK2Sh3Ny2K94PU4E46KZ5nX0EW0P63oT0JV45p5004J55Ou0dz2QY3LH0iJ4Rd6gG6Ik5li0Gf26M0Yd2lG6Wi4bJ4Lf6yE2Bk0wH0zxduh4T74AV4oz6ZY0A50TT1Kt0N46UX54R4NW7kU14101q0xI2Mj62L4Cg4mK6Xh2cF0Ve
4QO6dl3Oc0ja0DM25f7Za5oB4rS4g228V9PD0gQ068aCN68567472t0990hP8Od27W4h349Z44j6EA3nN0KL11I2PC6km5No61g5Pm1kC2NA34D0UNad07Kb4294cP8Qf39t0c302Zb3GaRM63VbxN0yS0l236u2354lQ4y06TB4aa0ZO2ol3Qa00k4OM6zn
4i45lt1WZ26P3LU0iW4Ry5W96jj5Oh0dg2QD3oI0JK45m6DF6KG5nE0EJ24a3Nd0kf4PH6ek5X85MY0fV0s729Q0Hz4sT4f54mV4x71S80Vx0xT0m562Q4Cz4NJ7kH3Pf01l1Ki2nk6UE54O4og6ZD2aj0TI0ze2OF6th4AK6l96yX0b40wU0Yy2lZ4w64bW
11Tdjm4K25Nr44w5173nS0KQ0Fa27J6Hl49G4Sc72i3MO0hM0gL2Ro6iA5LC46F6Gm28K1YA0DP0Q1hyvbEM4QR4D3del8cd15600v4OP4Z1hgt55U0ZR0O32bA0Wb4lL6Yo63K5RA0yN2Lm2Cl02G4Ma6xB6Vn4cM0Xc39i34Y0USbTNa5D4U05Pp86od0g
3LQ0iS66773w4i048Y8Ng26T3oM0JO45i6DB6jn5Ol0dc3Aaddr0kb4PL6eo6KC5nA0EN24e29U8Af47X4f1aBM6960fR0s30xP0m162UbyM4mR4x337v2261Km2no6UA54K4NN7kL3Pb01h0za2OB60d4AO4oc7Ja2an0TM8Pe38w4w24bSb2DaSN0b003Y
44s5133nW0KU0ey2PZ4K65Nv4Sg6fD3MK0hI0Fe27N6Hh49C46B6Gi28O0Id0gH2Rk6iE5LG4QV4D71o80jx0DT0Q56JYbEI5d84ax0ZV0O715200r4OT4Z563O4Bd0yJ2Li2bE0Wf4lH6Yk6Vj4cI0Xg2mD2Ch02C4Me6xF4U45Pt1kZ2NX3pU0UW4ny5k9
6jbber0do2QL3oA0JC45e6DNacl48U0Gs1B308694n4Rq5W15X05MQ12w0771M20Hr47Talm6KO5nM0EB24i3Nl0knbjs6ec4NBaQs3Pn01d1Ka2nc6UM54G59wa6g1S00Vp85Ld3D5F24Cr4Ls5I3dxM03U0Yq2lR43656v4oo6ZL2ab0TA0zm2ON60h4AC
0Fi27B6Hd49O4Sk6fH3MG0hE0eu2PV6kx5Nz4pw5u7dDI0KY0DX0Q95z65oW4QZ6dy1o40jt0gD2Rg6iI5LK46N6Ge28C0Ih2bI0Wj4lD6Yg63C4Bh0yF2Le1q60tv4OX4Z95d44at0ZZ2oy34Q1Ez4nu5k54U85Px1kV2NT2Cd02O4Mi6xJ6Vf4cE0Xk2mH
3oE0JG45a6DJ6jf5Od0dk2QH0821yz4Ru5W54i848Q0Gw1B71M60Hv47P4f95X45MU0fZ0733Nh0kj4PD6eg6KK5nI0EF24m1Ke2ng6UI54C4NF7kD3Pj0uh0xX0m95F64Cv4mZ6Xy1S40Vt0Yu2lV43256r4Lw5I70b803Q0zi2OJ60l4AG4ok6ZH2af0TE
4So6fL3MC0hA0Fm27F7XA49K4ps5u3dDM8BE0eq2PRaAnbdlbkm70T1o00jp30725w5z25oS46J6Ga28G0Il13i2Rc6iM5LO63G4Bl0yB2La2bM0Wn58i6Yc5d04ap8SFdUN1q200zb1gaPm61v7461kR2NP34U9Lf4nq5k16Vb4cA0Xo2mL3SA02K4Mm6xN
8YG31U5n14kq71664v2KP1nR07K3VA69F4Hm4fA6Sb2hL1MN0Rn2gM7LB5ya4Gl66G2Ia08J05z1t2aUmb4g4dp5a0dPN8VF20w3574zr6OQ75Tbnm0op1j02Wc16i4Yn6lM6Ba43J0Ll2yO22F0Cm4xCagr6cL4Vo0mA2Xb1e114XbalaDn5p34us8GEdAM
5L74Iw06Q0g81Y51LT53r4627Oi4jk0QE2df2JJ1oH4DG65l7nD4KF0ph2EK2kg1Ne4ej6PI4934hZ0St1V40h909P4Fv5C64Xt6mW0230cZ0Mv1H64c942P5kI6NK21m1Pg0nj3Kh74N4UD4ZE6of2TH0ak0OG2zd6AJ40a4yY4l81G70Bw18r2Yx5R54Wu
4EY4P82KT1nV8YC2ex5n54ku4fE6Sf2hH1MJ07O2Fd69B4Hi4Gh66C2Ie08N0Rj2gI7LF4iD4dt5a42jy3o90qv1t67oZ4JX6ay4TZ0ot1j40T90AX4zv6OU6Be43N0Lh2yK2Wg0bD4Yj6lI6cH4Vk0mE2Xf22B0Ci4xG6Md5p74uw0NYdAI1e51pT5Kz6nx
1Y11LP53v4665L34Is06Ud9E2JN1oL4DC65h7Om4jo0QA2db2kc1Na4en6PMaTs4KB04d2EOd6D09T4Fr5C2497bRm0Sp1V00Mr1H2aim42T4Xp6mS02717w0nn3Kl74J5Ea5kM6NO21i1Pc0OC3jA6AN40e4ZA6ob2TL0ao18vdcO5R14WqbCnafl1G30Bs
07C2Fh69N4He4fI6Sj2hD1MF0PW0E65n94ky4EU4P42KX1nZ05r1027oV4JT4dx5a80J71Ow0Rf2gE7LJ4iH4Gd66O2Ii08B2Wk0bH4Yf6lE6Bi43B0Ld2yG0T50AT4zz6OY4A74TV0ox1j81e914P5Kv4N654341s0NU3kW22N0Ce4xK6Mh6cD4Vg0mI2Xj
7Oa4jc0QM2dn2JB82q4DO65d68Tb7D06Y0g0dSm2874gS4r27MP4hR27632v0h109Xb8E67U7nL4KN04h2EC2ko1Nm4eb6PA5kA6NC21e1Po0nbdar74F4ULbbO79v0v30cR8DfdBn4c142X4yQ4l023T8Kg0lS0y276w6374ZM6on3Da0ac0OO2zl6AB40i
4fM6Sn3xa1MB07G2Fl69J4Ha4EQ4P0d5g83o0PS0E2a0DbQN50Uhbt0J31Os05v1067oR4JP5WA66K2Im08F0Rb2gA7LN4iL6Bm43F8Ex2yC2Wo0bL4Yb6lA4A34TR8fde4E0T10APcPlaeO54741w0NQ3kSdom14T5Kr4N277i4Vc0mM2Xn22J0Ca4xO6Ml
2JF1oD4DK6qh7Oe4jg0QI2dj1Y91LX4gW4r668P5YZ0rU0g40h51mu4Fz67Q7MT4hV0Sx1V82kk1Ni4ef6PE7nH4KJ04l2EG0nf3Kd74B4UH5kE6NG21a1Pk0Mz2xY4c54vT4Xx79r0v70cV0lW0y65R94Wy4yU4l423P1RZ0OK2zh6AF40m4ZI6oj2TD0ag
26533u4884iQb9F66V0i21lr05k3Ta7oO4JM4da6QB2jl1On0PN2em7Nbaa04EL64g2KA1nC07Z0f369Wb6G4fP479dRn29422W8Jd4xR4m377t6240mP0x12UC14I5Ko6nmajS41j0NL3kN20f0AM4zcaeR6al4TO0oa2ZB0380bQbcL78u4b24wS8EedCm
7nU4KW04q1110K41Nt51R6PX7MI4hK0Se2fF2Hj09A4Fg67L68M4If0rH2Gk2iG1LE4gJ6Ri7Ox4jz0QT0D51z81oY4DV4Q74ZT4O52TY0az0OV0Z755040p4yH6Lk23M0Bf0lJ2Yi6bG4Wd4Xe6mF2Vh0cK0Mg2xD6Cj42A5kX6NZ0U61Pv2N93Ky7pW4UU
4Gy5B90i61lv1BZ2gX7LW4iU4de6QF2jh1Oj05o2DD7oK4JI4EH64c2KE1nG0PJ2ei7Nf4kd4fT4s52hY2900sV0f75M84Hx6cY4Vz0mT0x51F80Cx4xV4m77Pd41n0NH3kJ2UG14M5Kk6ni6ah4TK0oe2ZF20b0AI4zg6OD4b64wW0Ly1I90w40bU5IZ6lX
0K01Np51VazN7nQ4KS04u1152Hn09E4Fc67H7MM4hO0Sa2fB2iC1LA4gN6Rm68I4Ib06D2God4d82l4DR4Q3a1GbPM0QP0D10OR0Z355440t4ZP4O1dnn15W0lN2Ym6bC5GA4yL6Lo23I0Bb0Mc3ha6Cn42E4Xa6mB2Vl0cO8ggdao7pS4UQbANadL0U21Pr
05c2DH7oG4JE4di6QJ2jd1Of0Rw1W74804iY4Gu5B52Ix08S07R2Fy5M44Ht4fX4711X61MW0PF2ee7Nj4kh4ED64o2KI1nK2UK14A5Kg6ne7Ph41b0ND3kF1F40Ct4xZ6My5S64Vv0mX0x90300bY4Yw6lT6Bx43S0Lu1I520n0AE4zk6OH6ad4TG0oi2ZJ
7MA4hC0Sm2fN2Hb09I4Fo67DaTnb5d04y119dQM8WE4es6PP5o24jr8XD30V1z01oQ70565u68E4In06H2Gc2iO1LM4gB6Ra5ia6Lc23E0Bn0lB2Ya6bO4Wlc4FaEm1d20ar8FFePo55840x5kP6NR21t3440ns1k374Wbon4Xm6mN3FA0cC0Mo2xL6Cb42I
4dm6QN3zA1Ob05g2DL7oC4JA4Gq5B1d7G08W0Rs1W3484bSn52u4751X21MS07Vd8F5M04Hp5Ua64k2KM1nO0PB2ea7Nn4kl7Pl41f8GX3kB2UO14E5Kc6na5S24Vr19udbL1F00CpbBmagoahn43W0Lq1I103416t4Ys6lP75I4TC0om2ZN20j0AA4zo6OL
2Hf09M4Fk6sH7ME4hG0Si2fJ0K81Nx4ew6PT7nYbqh0pu1u51z41oU4DZ65q5o64jv0QX0D92iK1LI4gF6Re68A4Ij06L2Gg0lF2Ye6bK4Wh4yD6Lg23A0Bj0OZ2zy5q44tt4ZX4O91d60av0nw1k774S4UY5kT6NV21p1Pz0Mk2xH6Cf42M4Xi6mJ2Vd0cG
20U8Hf4zP4o175v6060oR0z32WA0bb4YL6lo6BC43h0LN2ym22d0CO4xa6MB6cn4VM0mc3Ha0u214zbaNaDL7PS41Y8GgdAo24731w7NQ4kScom64T0k01np07i2FB69d4HO4fc7Ca2hn1Ml0RL2goavS4ib4GN66e2IC08h05X0d1aUOb4E4dR4q3dPl8Vd
4XV4M71f80cx0MT0X557242r5kk6Ni21O1PE0nH3KJ74l4Uf4Zg6oD2Tj0aI0Oe2zF6Ah40C5iZ5830W40BU0ly1i94B64WW7lW4IU06s1330I61Lv4gy5b97OK4jI0Qg2dD2Jh1oj4De65N7nf4Kd04B2Ei2kE1NG4eH6Pk5m84hx0SV0F72HY09r4FT4S5
5Q84Tx0oV0z720Q0Az4zT4o56BG43l0LJ2yi2WE0bf4YH6lk6cj4VI0mg2XD2vh0CK4xe6MF7PW4uU2n93ky0u61pv5KX6nZ5UZ64P0k41nt0Py1U97NU4kW4fg6SD2hj1Mh07m2FF7mI4HK4GJ66a2IG08l0RH2gk7Ld4if4dV4q71Z81OY0qT0d57ox4Jz
0MP0X157642v4XR4M3dll17U0nL3KN74h4Ub5ko6Nm21K1PA0Oa2zB6Al40G4ZcaER2Tn0aM18Tdcm4B24WSbCL5870W00BQ0I21Lr53TaxL68z4IQ06w1372Jl1on4Da65J7OO4jM0Qc30i2kA1NC4eL6Po7nbaA004F2Emd6f09v4FP4S1a3EbRO0SR0F3
2WI0bj4YD6lg6BK4wh0LF2ye1D60Av4zX4o95Q44Tt0oZ2Zy01214r5KT6nVajh41Q0Nw1K722l0CG4xi6MJ6cf4VE0mk2XH07a2FJ69l4HG4fk6SH2hf1Md0Pu1U57NYbQh4Ew6pT0k81nx05P0d95O64Jv4dZ4531Z41OU0RD2gg7Lh4ij4GF66m2IK1lI
5kc6Na21G1PM8gX3KB74d4Unbbm79T1f00cp397dBL5s242z4ys6LP23v3660lq1i176Ubml4Zo6oL2Tb0aA0Om2zN7QA40K7OC4jA0Qo2dL3ZA1ob4Dm65F68vb7f0rs1w3dSO8UG4gq5b15m04hp8ZF32T1x209z72767w7nn4Kl04J2Ea2kM1NO51i6Pc
6BO43d0LB2ya2WM0bn5Ia6lc5Q04Tp8fFe4g1D20ArcPNaemajl41U0Ns1K301614v5KP6nR6cb4VA0mo2XL22h0CC4xm6MN4fo6SL2hb8TY07e2FN69h4HC4Es64Xd5E83M0Pq1U1a0fbQl50w4571Z01OQ05Tenm5O24Jr4GB66i2IO08d1Ba2gc7Ll4in
0nD3KF7ph4Uj5kg6Ne21C1PI0MX0X95s64vv4XZ6my1f40ct0lu1i56bx5Gz4yw6LT0W80BY0Oi2zJ6Ad40O4Zk6oH2Tf0aE2Jd1of4Di65B7OG4jE0Qk2dH2ix1Lz4gu5b568r4IY0rw1w71x61mW4FX4S95m44ht0SZ2fy2kI1NK4eD6Pg7nj4Kh04N2Ee
22u3754xp59877Vblo0mr1h22Ua14k5KM6nO7PB41H0Nn3kl20D0Ao4zA6Ob6aN4Tm0oC3JA1g30bsbcn78W56943y384dCO9Kd33W5l34is73466t1y108y05I2Db7om4Jo4dC7AA2jN1OL0Pl2eOats4kB4En64E2Kc1na07x12869ub6e4fr5c2dRL8TD
4Zv6oU0010aX0Ot1J46Ay40R4yj6LI23o0BD0lh2YK6be4WF4XG6md2VJ0ci0ME2xf6CH42c5kz6Nx1E51PT0nYdaI5P74Uw5N54Ku04S2Ex2kT1NV4eY4407Mk4hi0SG2fd2HH09c4FE67n68o4ID06b2GI2ie1Lg4gh6RK7OZ4jX0Qv1T62Jy3O94Dt5A4
4C94VX0mv1h622q0CZ4xt6MW7PF41L0Nj3kh2Ue14o5KI6nK6aJ4Ti0oG2Zd2tH0Ak4zE6Of5r54wu3802yx1g70bw4YY4L85Wz66p1y51lT0RY0G85l74iw4dG6Qd2jJ1OH05M2Df7oi4Jk4Ej64A2Kg1ne0Ph2eK7ND4kF4fv5c60H91My0st1v469q4HZ
0Op1J0ako40V4Zr6oQ00515u0ll2YO6ba4WB4yn6LM23k1Ra0MA2xb6CL42g4XC79I2VN0cm8gEdaM5P34UsbAladn1E11PP2kP1NR51t4445N14Kq04Weon2HL09g4FA67j7Mo4hm0SC32I2ia1Lc4gl6RO68k5Ya06f2GMd4F82N4Dp5A0a1ebPo0Qr1T2
2Ui14c5KE6nG7PJ4uH0Nf3kd0V70CV4xx5904C54VT0mz2XY2WX16R4YU4L456143q0LW0Y620L0Ag4zI6Oj6aF4Te0oK2Zh05A2Dj7oe4Jg4dK6Qh2jF1OD0RU0G47Ly5yZ4GW4R61y908q07p1207mT4HV4fz6SY0H51Mu0Pd2eG7NH4kJ4Ef64M2Kk1ni
4yb6LA23g0BL18I2YC6bm4WNc4daEO0090aP8FdePM4a340Z5kr4n221V8Ie0nQ3KS74u6154XO6ml2VB0ca0MM2xn7Sa42k7Mc4ha0SO2fl3Xa09k4FM67faTLb5F0pS0e2dQo8Wg4eQ4487OR4jP25430t0j31oscnn65W68g4IL06j2GA2im1Lo53I6RC
7PN41D0NbdAr2Um14g5KA6nC4C14VP19Wdbn0V30CRbBO59456543u0LS0Y2dmo16V4YQ4L06aB4Ta0oO2Zl20H0Ac4zM6On4dO6Ql2jB8Vy05E2Dn7oa4Jc4GS4R2d7e08u0RQ0G0a2FbSL52WayO0H11Mq07t12469y4HR4Eb64I2Ko1nm8Yx2eC7NL4kN
0ld2YG6bi4WJ4yf6LE23c0BH0Ox1J84a74tV4Zz6oY0t50aT0nU3KW74q5EZ5kv4n61E91PX0MI2xj6CD42o4XK6mh2VF0ce2HD09o4FI67b7Mg4he0SK2fh2kX1NZ4eU4p45N94Ky0pW0e60j71ow4Dx5A87OV4jT0Qz2dY2ii1Lk4gd6RG68c4IH06n2GE
5Ls4I3dhl13U0IP3lR53646v5oo6Jm25K1TA0jL3ON6dA4Qb5NBaAR2Pn0eM0Ka3nc6El44G49wabN0S00FQ8aedgm4F24SS4X04MQ02w1770M20XS57Ta8D7KO4nM0Uc34i2Nl1knaJ161J6zCaE000F2Am2oA0Zb4aL6Toa7E58U0WR0B318684n4BP4W1
24Q0Ez5nu4k55U84Px0kV3NT2SE0ff5Mi6hk6FG47l0HJ29a2rh0GK48m6IF6gj4RI0ig3Le0q60dW5OX5Z94d44qU1ZZ3oy0Ty1Q94z64oW5QZ60P0o40zU03m2BF6yh4LK4bg6WD2lj0YI0VH2ck6XE4mf4CJ62a2MG0xd0uT3PV7kx4Nz5pw4u7dTh1KY
0IT3lV53246r5Lw4I71b80gx0jH3OJ6dE4Qf5ok6Ji25O0Dd0Ke3ng6Eh44C5NF6kD2Pj0eI0hy1m94F64SW49s6HX0S40FU0M60XW4cy5f94X44MU02s1732Nh1kj5PD61N7KK4nI0Ug34m2oE0Zf4aH6Tk6zG4Od00B2Ai1820yz4BT4W55i84lx0WV0B7
71v6460kR3NP24U8Lf5nq4k16FC47h0HN29e2SA0fb5Mm6ho6gn4RM0ic3La26d0GO48i6IB4d045Y8CgdEo0q20dSbeNhYuckm60T0o00zQ20735w4z24oS4bc7Ga2ln0YM03i2BB6yl4LO4CN62e2MC1hA0VL2co6XA4mb5ps4u3dTl8Rd01X3PRaQOb0E
5og6Je25C0Dh0jD3OF6dI4Qj7l96iy1b40gt0IX28s5w64rv5mV5x70S80FY0hu1m56fx5Cz5NJ6kH2Pf0eE0Ki3nk6Ed44O7KG4nE0Uk34a2Nd1kf5PH61B4X84MY0vw1s72mx1Hz4cu5f55i44lt0WZ2by2LU0yv4BX4W96zK4Oh00N2Ae2oI0Zj4aD6Tg
2SM0fn5Ma6hc6FO47d0HB29i24Y0ErbDoaam5U04Pp8bFddN05610v5OP5Z1anl45U0Js1O326h0GC48e6IN6gb4RA0io3Lm03e2BN7iA4LC4bo6WL2lb0YA0Tq1Q1a4fbUl4As5D3d1E87M01TdzL5K24Nr54w4172nS1KQ1Fa2cc6XM4mn4CB62i2MO0xl
1za3OB6dM4Qn5oc6Ja25G0Dl9Pe28w5w246zbfmaCo1b00gp0hq1m172Ubil5mR5x327v3260Km3no7UA44K5NN6kL2Pb0eAdtS1kb5PL61F7KC4nA0Uo34e39U8QG4cq5f1aRl7960vs1s32LQ0yr76763w5i04lp9Ng36T2oM0Zn55i6Tc6zO4Ol00J2Aa
6FK4sh0HF29m2SI0fj5Me6hg5U44Pt0kZ3NX2pU0Ev5ny4k94d845Q0Jw1O705210r5OT5Z56gf4RE0ik3Li26l0GG48a6IJ4bk6WH2lf0YE03a2BJ6yd4LG4Aw5D70o80zY0Tu1Q56ZxbUh54s4132nW1KU01P3PZ5K64Nv4CF62m2MK0xh0VD2cg6XI4mj
5NS6kQ04511u0Kp1N0aoo44V49f6HM27k1Va0hl3Mn6fa4SB5Lb7yA2RN0gm0IA28j6GL46gbElhyW1A10Dq8cEdeM5T34Qs5J14Oq00Wekn2oP0Zs55t4046YN4lm0WC36I2LL0yo4BA63j6xcbws02f2CM2ma0XB4cl6VOa5ebTo0Ur1P2d0F86N5PQ5E0
26q0GZ5lU5y44G94RX0iv1l62Qe0dF5OI6jK6Dg45L0Jj3oh2pH0Ek5nd6Kf6eJ4Pi0kG3NE1c70fw5Mx4H85v54su1Xz29p0VY0C85h74mw5Sz62p2MV0xu01M3PG7ki4Nk54n6Ud2nJ1KH0Th2aK6Ze4oF4Aj60A2Og0zD0wt1r46yy4LZ4bv5g60L90YX
0Kt1N46Ey44R5NW6kU0410eX0hh3Mj6fe4SF49b6HI27o0FD0IE28n6GH46c5Lf6id2RJ0gi0jYdeI5T74Qw5oz6Jx1A50Du2oT0Zw4aY4005J54Ou00S2Ax2LH0yk4BE63n6YJ4li0WG2bd2me0XF4ch6VK6xg4MD02b2CI2Ny3K95PU5E47KZ4nX0Uv1P6
73Vbho0ir1l226u33548x5y06Dc45H0Jn3ol2Qa0dB5OM6jO6eN4Pm0kC3NA24D0EobDr6Kb52947y8AG29t1c30fsbgnaBl77462t1990xq9Od37W5h34ms54j7EA2nN1KL01I3PC7km4No4An60E2Oc1ja0Tl2aO6Za4oB4br5g238V8PD03x168aSo785
49n6HE27c0FH0hd3Mf6fi4SJbdI6kY0p50eT0Kx1N84e74pV5ov4j61A90Dy0jU3OW6dX5AZ5Lj6ih2RF0ge0II28b6GD46o6YF4le0WK2bh2LD0yg4BI63b5J94Oy0tW0a62oX1JZ4aU4t47KV4nT0Uz34p0n71kw5PY5E86xk4MH02n2CE2mi0XJ4cd6VG
2Qm0dN5OA6jC6Do45D0JbdEr0R30GR48tacM4G14RP94Odfndio12V5Mp4H052547u0HS29x24H0Ec5nl6Kn6eB4Pa0kO3NM01E3PO7ka4Nc54f6Ul2nB8Ry0VQ0C0a6F59V4CS4V219585m03t1644Y34LR56Wa9G0L10YP1DA2aC6Zm4oN4Ab60I2Oo0zL
1xA3Mb6fm4SN49j6HA27g0FL8BddDl4e344ZbdMaAO0490eP0jQ3OS70u6555or4j225V8Me0IM28f7Wa46k5Ln6il2RB0ga9130yc4BM63f6YB4la0WO2bldUo8Sg4aQ408aPLb1F0tS0a20n31ksbzO61W7KR4nP21434t2mm0XN57I6VC6xo4ML02j2CA
6Dk4qH0Jf3od2Qi0dJ5OE6jG4G54RT0iz3Lx0R70GV48p5y852147q0HW3mU2SX12R5Mt4H46eF4Pe0kK3NI24L0Eg5nh6Kj54b6Uh2nF1KD01A3PK7ke4Ng4CW4V61910xy0VU0C46XX59R4bz6WY0L50YT03p1604Y74LV4Af60M2Ok0zH0Td2aG6Zi4oJ
5H34Ms02UdyM2mR0Xq57v4267Km4no0UA34K2NN1kL5Pb61h6za4OB00d2AO2oc1Ja4an6TMa7g58w0Wp1R0d2D84L4Br5G25LQ5Y006713w0Ir1L2amm46T5oM6JO25i0DB0jn3Ol6dc5Aabdr6kb2PL0eo0KC3nA6EN44e49Uabl1C30Fs8aG0965V14Sq
1Dz2ax5j54ou4AY4T82OT0zw03O2Bd6yJ4Li4bE6Wf2lH0Yk0Vj2cI6Xg4mD4Ch62C2Me0xF0uv1p67kZ4NX5pU5e42ny3k90P90EX5nW6KU6ey4PZ0kt1n42Sg0fD5MK6hI6Fe47N0Hh29C26B0Gi48O6Id6gH4Rk0iE3LG1a50du5Oz6jx5t74qw0JYdEI
2mV0Xu57r4225H74Mw02Q0c82NJ1kH5Pf61l7Ki4nk0UE34O2og0ZD4aj6TI6ze4OF0th2AK0l90yX4Bv5G66Yy4lZ0Wt1R40Iv1L64g946P5LU5Y40630gZ0jj3Oh6dg4QD5oI6JK25m0DF0KG3nE6EJ44a5Nd6kf2PH0ek1xz0925V54Su49Q4h81C70Fw
75660v2OP0zs9Mf35U5j14oq4bA6Wb2lL0Yo03K3RA6yN4Lm4Cl62G2Ma0xB0Vn2cM6Xc59i54Y5e0dTN8RF01z1p2aQmb0g71Tbjm0kp1n024w3175nS6KQ6Fa47J0Hl29G2Sc12i5MO6hM6gL4Ro0iA3LC26F0Gm48K7YA5t34qs8CEdEM1a10dqbelhYW
7Ke4ng0UI34C2NF1kD5Pj6uh6xX6m90vU0c42mZ0Xy4cW4v64y74lV0Wx1R80l50yT4Bz63Q6zi4OJ00l2AG2ok0ZH4af6TE5oE6JG25a0DJ0jf3Od6dk4QH5LY5Y80r70gV0Iz28Q4g54rT5mt4h427P1VZ0hW3MU5V94Sy5Nh6kj2PD0eg0KK3nI6EF44m
03G2Bl6yB4La4bM6Wn38i0Yc0TS0A2a4DbUN4AQ4T0d1g87o01v1467kR4NP54Uhft0N31Ks0Vb2cA6Xo4mL5SA62K2Mm0xN2So0fL5MC6hA6Fm47F1XA29K0P10EPbDMaaO4E34PR8bdddldkm10T5Or4J250745w0JQ3oS26J0Ga48G6Il73i4Rc0iM3LO
2NB86q5Pn61d7Ka4nc0UM34G39w8Qe4cS4v2aRNb3D02Y0c00l10yPbxM63U4y34lR23636v2oo0ZL4ab6TA6zm4ON00h2AC0jbder6do4QL5oA6JC25e0DN9PG28U4g146X686aCM0r30gR0hS3MQ72w67749Y4h027T8Og0KO3nM6EB44i5Nl6kndjs0ec
4bI6Wj2lD0Yg03C2Bh6yF4Le4AU4T42OX1jZ0TW0A65j94oy54Q5e80N71Kw01r1427kV4NT4Cd62O2Mi0xJ0Vf2cE6Xk4mH6Fi47B0Hd29O2Sk0fH5MG6hE4E74PV0kx1n80P50ETbDI6KY50345s0JU3oW1a90dy5Ov4J66gD4Rg0iI3LK26N0Ge48C6Ih
4Z24OS00u1550O00ZQ55Vhgw6Yl4lO0Wa2bB2Ln0yM4Bc63H6xA4Mb02D2Co2mC1HA4cN6Vma5GbTM0UP34Zd0d86l5Ps4U35Nq4K1djn11W0KR3nP51444t49D6Ho27I0Fb0hN3ML6fC5CAaV16iB2Rl0gO0Ic28H6Gn46EbENhyu0Q20DS8cgdeo4D04QQ
1FZ2cX4x44mU4Cy5F90m60xW01o3Pe7kK4NI54L6UF2nh1Kj0TJ2ai6ZG4od4AH60c2OE0zf0wV0b75I84Lx4bT4w52lY0Yz1B80Gx5lw4i76gY4Rz0iT3LV2QG0dd5Ok6ji6DE45n0JH3oJ24b0EI5nF6KD6eh4PK0ke3Ng0s40fU5MZ6hX4f64sW0Hy1M9
0O40ZU55R6TX4Z64OW00q1512Lj0yI4Bg63L6Yh4lK0We2bF2mG0Xd4cJ6Vi6xE4Mf0vH2Ckdth1kY5Pw4U77Kx4nz0UT3pV0KV3nT51044p5Nu4K52PY0ez0hJ3MH6fG4Sd5mi6Hk27M0Ff0Ig28L6Gj46A5LD6iF2Rh0gK1zZ3Oy4D44QU5oX5z90Q60DW
byN62V0m20xS22537u4x04mQ54H6UB2nl1Kn01k3Pa7kO4NM4AL60g2OA0zb0TN2am6ZCae04bP43938t8Pf03Z0b3aSMb2G73t6640iP08926W8Nd48Z4i36DA45j0JL3oN2QC10I5Oo6jm6el4PO0ka3Nc24f0EM5nBaaR4f24sS8Ae29V0780fQ695aBN
6Yd4lG0Wi2bJ2Lf0yE4Bk6wH6zxbuh0tu1q50O80ZY4aw5d75k64nv0UX34R2NW1kU74161q6xI4Mj02L2Cg2mK0Xh4cF6Ve49L6Hg27A0Fj0hF3MD6fK4Sh5Ny4K92PU0ev0KZ3nX5u44pt5oT5z525p1Tz0jw1o74D84QY5LH6iJ2Rd0gG0Ik3li6Gf46M
01g3Pm7kC4NA54D6UNdTS1Kb0Vs1S3a6d59t4Cq5F1d3G85O03VdxN5I04Lp56u4352lQ0Yr0TB2aa6ZO4ol5Qa60k2OM0zn2QO0dl5Oc6ja6DM45f1Za3oB1B00Gp48Vaco5W24Rr94m08507412t5MR5X3aln47W0Hq1M124j0EA5nN6KL71I4PC0km3No
2Lb0yA4Bo63D7IA4lC0Wm2bNdUM8SE4as5d3aPnb1d00y1592NS1kQ74561u5k24nr9Le34V2mO0Xl4cB6Va6xM4Mn02H2Cc0hB8036fO4Sl49H6Hc27E0Fn8BFdDN51844xbdoaAm2PQ0er0js1o370Wbkn5oP5z125t3040Io28D6Gb46I5LL6iN3BA0gC
5pH6UJ2nd1Kf01c3Pi7kG4NE4Cu5F52Mx1hz0Vw1S74x84mY4bX4312lU0Yv03R2By5I44Lt4AD60o2OI0zj0TF2ae6ZK4oh6DI45b0JD3oF2QK0dh5Og6je5W64Rv0iX0811B40Gt48R6Iy6Fx47S0Hu1M50700fY5MV5X76ed4PG0ki3Nk24n0EE5nJ6KH
35620v6OP4zsbnl75U1j10oq0bA2Wb6lL4Yo43K7RA2yN0Lm0Cl22G6Ma4xB4Vn6cM2Xc19i14Y1e0aDobam41z5p2dAL8GD31T8YF4kp5n064w7171nS2KQ2Fa07J4Hl69G6Sc52i1MO2hM2gL0Ro4iA7LC66F4Gm08K3YA1t30qsb4faUl5a14dq8VGdPO
6mV4Xu17r0221H70Mw42Q4c86NJ5kH1Pf21l3Ki0nk4UE74O6og4ZD0aj2TI2ze0OF4th6AK4l94yX0Bv1G62Yy0lZ4Wt5R44Iv5L60g906P1LU1Y44634gZ4jj7Oh2dg0QD1oI2JK65m4DF4KG7nE2EJ04a1Nd2kf6PH4ek5xz4921V50Su09Q0h85C74Fw
5Dz6ax1j50ou0AY0T86OT4zw43O6Bd2yJ0Li0bE2Wf6lH4Yk4Vj6cI2Xg0mD0Ch22C6Me4xF4uv5p63kZ0NX1pU1e46ny7k94P94EX1nW2KU2ey0PZ4kt5n46Sg4fD1MK2hI2Fe07N4Hh69C66B4Gi08O2Id2gH0Rk4iE7LG5a54du1Oz2jx1t70qw4JYaUh
1H30Ms42Uail6mR4Xq17v0263Km0no4UA74K6NN5kL1Pb21h2za0OB40d6AO6oc5Ja0an2TMdcN18w4Wp5R0afmbCo0Br1G21LQ1Y046753w4Ir5L2d9D06T1oM2JO65i4DB4jn7Ol2dc1Aa8WY2kb6PL4eo4KC7nA2EN04e09Ud6E5C34FsbRl4961V10Sq
0bI2Wj6lD4Yg43C6Bh2yF0Le0AU0T46OX5jZ4TW4A61j90oy14Q1e84N75Kw41r5423kV0NT0Cd22O6Mi4xJ4Vf6cE2Xk0mH2Fi07B4Hd69O6Sk4fH1MG2hE0E70PV4kx5n84P54ET83j2KY10305s4JU7oW5a94dy1Ov0J62gD0Rg4iI7LK66N4Ge08C2Ih
6NBa591Pn21d3Ka0nc4UM74G79wbbN0cS0v2dBo8Dg42Y4c04l14yP8Kf23U0y30lR63676v6oo4ZL0ab2TA2zm0ON40h6AC4jbauS2do0QL1oA2JC65e4DNb7E68U0g106X286dSl4r34gR4hS7MQ32w27709Y0h067Tb8D4KO7nM2EB04i1Nl2knazR4ec
43G6Bl2yB0La0bM2Wn78i4Yc4TS4A2e4D8fe0AQ0T0aeNcPm41v5463kR0NP14Udol4N35Ks4Vb6cA2Xo0mL1SA22K6Mm4xN6So4fL1MC2hA2Fm07F5XA69K4P14EP83nd5f0E30PRbQOa0Ehbu50T1Or0J210705w4JQ7oS66J4Ga08G2Il33i0Rc4iM7LO
3Ke0ng4UI74C6NF5kD1Pj2uh2xX2m94vU4c46mZ4Xy0cW0v60y70lV4Wx5R84l54yT0Bz23Q2zi0OJ40l6AG6ok4ZH0af2TE1oE2JG65a4DJ4jf7Od2dk0QH1LY1Y84r74gV4Iz68Q0g50rT1mt0h467P5VZ4hW7MU1V90Sy1Nh2kj6PD4eg4KK7nI2EF04m
8Je22V4m24xS62577u0x00mQ14H2UB6nl5Kn41k7Pa3kO0NM0AL20g6OA4zb4TN6am2ZC8fx0bP03978tbcM43Z4b3dCl8Ed33t2644iP48966Wb9G08Z0i32DA05j4JL7oN6QC50I1Oo2jm2el0PO4ka7Nc64f4EM1nB9630f20sSb6F69V4784fQ295dRo
4O44ZU15R2TX0Z60OW40q5516Lj4yI0Bg23L2Yh0lK4We6bF6mG4Xd0cJ2Vi2xE0Mf4vH6CkadI5kY1Pw0U73Kx0nz4UT7pV4KV7nT11004p1Nu0K56PY4ez4hJ7MH2fG0Sd1mi2Hk67M4Ff4Ig68L2Gj06A1LD2iF6Rh4gK5zZ7Oy0D40QU1oX1z94Q64DW
5FZ6cX0x40mU0Cy1F94m64xW41o7Pe3kK0NI14L2UF6nh5Kj4TJ6ai2ZG0od0AH20c6OE4zf4wV4b71I80Lx0bT0w56lY4Yz5B84Gx1lw0i72gY0Rz4iT7LV6QG4dd1Ok2ji2DE05n4JH7oJ64b4EI1nF2KD2eh0PK4ke7Ng4s44fU1MZ2hX0f60sW4Hy5M9
0Z20OS40u5554O04ZQ15Vdno2Yl0lO4Wa6bB6Ln4yM0Bc23H2xA0Mb42D6Co6mC5HA0cN2Vmdan8gf4UP74ZadMbAO1Ps0U31Nq0K1azO51W4KR7nP11404t09D2Ho67I4Fb4hN7ML2fC1CA8Uy2iB6Rl4gO4Ic68H2Gn06E82md4e4Q24DSbPLa1F0D00QQ
1pH2UJ6nd5Kf41c7Pi3kG0NE0Cu1F56Mx5hz4Vw5S70x80mY0bX0316lU4Yv43R6By1I40Lt0AD20o6OI4zj4TF6ae2ZK0oh2DI05b4JD7oF6QK4dh1Og2je1W60Rv4iX4815B44Gt08R2Iy2Fx07S4Hu5M54704fY1MV1X72ed0PG4ki7Nk64n4EE1nJ2KH
6Lb4yA0Bo23D3IA0lC4Wm6bNaElc4G0as1d3ePn8FG40y5596NS5kQ34521u1k20nrboo74V6mO4Xl0cB2Va2xM0Mn42H6Cc4hBaws2fO0Sl09H2Hc67E4Fnb5eaTo11804x8WDdQL6PQ4er4js5o330W8XE1oP1z165t7044Io68D2Gb06I1LL2iN7BA4gC
41g7Pm3kC0NA14D2UNaDr5Kb4Vs5S3dbM19t0Cq1F1agnbBl43Vaho1I00Lp16u0356lQ4Yr4TB6aa2ZO0ol1Qa20k6OM4zn6QO4dl1Oc2ja2DM05f5Za7oB5B04Gp08Vd7F1W20RrbSo48547452t1MR1X3d8G07W4Hq5M164j4EA1nN2KL31I0PC4km7No
2Yd0lG4Wi6bJ6Lf4yE0Bk2wH2zx8FC4tu5q54O84ZY0aw1d71k60nv4UX74R6NW5kU34121q2xI0Mj42L6Cg6mK4Xh0cF2Ve09L2Hg67A4Fj4hF7MD2fK0Sh1Ny0K96PU4ev4KZ7nX1u40pt1oT1z565p5Tz4jw5o70D80QY1LH2iJ6Rd4gG4Ik7li2Gf06M
31v2464kR7NP64Ucol1nq0k12FC07h4HN69e6SA4fb1Mm2ho2gn0RM4ic7La66d4GO08i2IB0d005Yb4DaUN4q24dS8VedPm8Hg20T4o04zQ60775w0z20oS0bc3Ga6ln4YM43i6BB2yl0LO0CN22e6MC5hA4VL6co2XA0mb1ps0u3aDMbaO41X7PRdAn8Gf
4IT7lV13206r1Lw0I75b84gx4jH7OJ2dE0Qf1ok2Ji65O4Dd4Ke7ng2Eh04C1NF2kD6Pj4eI4hy5m90F60SW09s2HX4S44FU4M64XW0cy1f90X40MU42s5736Nh5kj1PD21N3KK0nI4Ug74m6oE4Zf0aH2Tk2zG0Od40B6Ai5824yz0BT0W51i80lx4WV4B7
64Q4Ez1nu0k51U80Px4kV7NT6SE4ff1Mi2hk2FG07l4HJ69a6rh4GK08m2IF2gj0RI4ig7Le4q64dW1OX1Z90d40qU5ZZ7oy4Ty5Q90z60oW1QZ20P4o44zU43m6BF2yh0LK0bg2WD6lj4YI4VH6ck2XE0mf0CJ22a6MG4xd4uT7PV3kx0Nz1pw0u7aDI5KY
1Ls0I3axM53U4IP7lR13606v1oo2Jm65K5TA4jL7ON2dA0Qb1NBdQs6Pn4eM4Ka7nc2El04G09wd6g4S04FQbRNa3D0F20SS0X00MQ42w5774M24XS17Tdlm3KO0nM4Uc74i6Nl5kn8Iy21J2zC8Fx40F6Am6oA4Zb0aL2Todcl18U4WR4B3586bCM0BP0W1
2FK0sh4HF69m6SI4fj1Me2hg1U40Pt4kZ7NX6pU4Ev1ny0k90d805Q4Jw5O745250r1OT1Z52gf0RE4ik7Li66l4GG08a2IJ0bk2WH6lf4YE43a6BJ2yd0LG0Aw1D74o84zY4Tu5Q52Zx8fC14s0136nW5KU41P7PZ1K60Nv0CF22m6MK4xh4VD6cg2XI0mj
5za7OB2dM0Qn1oc2Ja65G4Dlb7g68w1w206z8UFdSN5b04gp4hq5m132U8ZG1mR1x367v7264Km7no3UA04K1NN2kL6Pb4eAadr5kb1PL21F3KC0nA4Uo74e79Ubbl0cq1f1dBM3964vs5s36LQ4yr36723w1i00lpbmm76T6oM4Zn15i2Tc2zO0Ol40J6Aa
6SM4fn1Ma2hc2FO07d4HB69i64Y4Er83Ld5D1U00PpbQma0g45650v1OP1Z1enl05U4Js5O366h4GC08e2IN2gb0RA4io7Lm43e6BN3iA0LC0bo2WL6lb4YA4Tq5Q1e4f8fG0As1D3aelcPO41Tajm1K20Nr14w0176nS5KQ5Fa6cc2XM0mn0CB22i6MO4xl
1og2Je65C4Dh4jD7OF2dI0Qj3l92iy5b44gt4IX68s1w60rv1mV1x74S84FY4hu5m52fx1Cz1NJ2kH6Pf4eE4Ki7nk2Ed04O3KG0nE4Uk74a6Nd5kf1PH21B0X80MY4vw5s76mx5Hz0cu1f51i40lt4WZ6by6LU4yv0BX0W92zK0Oh40N6Ae6oI4Zj0aD2Tg
33V9Ke4ir5l266u73508x1y02Dc05H4Jn7ol6Qa4dB1OM2jO2eN0Pm4kC7NA64D4Eo83Q2Kb12907yb6d69t5c34fs8TEdRM37422t5994xqbln77W1h30ms14j3EA6nN5KL41I7PC3km0No0An20E6Oc5ja4Tl6aO2Za0oB0br1g278Vbco43x568dCN385
4Kt5N42Ey04R1NW2kU4414eX4hh7Mj2fe0SF09b2HI67o4FD4IE68n2GH06c1Lf2id6RJ4gi4jYauh1T70Qw1oz2Jx5A54Du6oT4Zw0aY0001J50Ou40S6Ax6LH4yk0BE23n2YJ0li4WG6bd6me4XF0ch2VK2xg0MD42b6CI6Ny7K91PU1E43KZ0nX4Uv5P6
66q4GZ1lU1y40G90RX4iv5l66Qe4dF1OI2jK2Dg05L4Jj7oh6pH4Ek1nd2Kf2eJ0Pi4kG7NE5c74fw1Mx0H81v50su5Xz69p4VY4C81h70mw1Sz22p6MV4xu41M7PG3ki0Nk14n2Ud6nJ5KH4Th6aK2Ze0oF0Aj20A6Og4zD4wt5r42yy0LZ0bv1g64L94YX
1NS2kQ44551u4Kp5N0eoo04V09f2HM67k5Va4hl7Mn2fa0SB1Lb3yA6RN4gm4IA68j2GL06g82Od4G5A14DqbPna1d1T30Qs1J10Oq40Wakn6oP4Zs15t0042YN0lm4WC76I6LL4yo0BA23j2xc8DX42f6CM6ma4XB0cl2VOdaL8gD4Ur5P2adobAm1PQ1E0
2Dk0qH4Jf7od6Qi4dJ1OE2jG0G50RT4iz7Lx4R74GV08p1y812107q4HW7mU6SX52R1Mt0H42eF0Pe4kK7NI64L4Eg1nh2Kj14b2Uh6nF5KD41A7PK3ke0Ng0CW0V65914xy4VU4C42XX19R0bz2WY4L54YT43p5600Y70LV0Af20M6Ok4zH4Td6aG2Zi0oJ
5xA7Mb2fm0SN09j2HA67g4FLb5GaTM0e304Z8WfdQn4494eP4jQ7OS30u2551or0j265Vcno4IM68f3Wa06k1Ln2il6RB4gaafR4yc0BM23f2YB0la4WO6blaENc4e0aQ008ePL8Fe4tS4a24n35ks8Id21W3KR0nP61474t6mm4XN17I2VC2xo0ML42j6CA
6Qm4dN1OA2jC2Do05D4JbaUS4R34GR08td7d0G10RPbSMa2GayN52V1Mp0H012507u4HS69x64H4Ec1nl2Kn2eB0Pa4kO7NM41E7PO3ka0Nc14f2Ul6nBaQ14VQ4C0dbo19V0CS0V2595bBN43t5640Y30LR16Wdmn4L14YP5DA6aC2Zm0oN0Ab20I6Oo4zL
09n2HE67c4FH4hd7Mf2fi0SJ8Wb2kY4p54eT4Kx5N80e70pV1ov0j65A94Dy4jU7OW2dX1AZ1Lj2ih6RF4ge4II68b2GD06o2YF0le4WK6bh6LD4yg0BI23b1J90Oy4tW4a66oX5JZ0aU0t43KV0nT4Uz74p4n75kw1PY1E82xk0MH42n6CE6mi4XJ0cd2VG
4MP4X117602v0XR0M3a8E57U4nL7KN34h0Ub1ko2Nm61K5PA4Oa6zB2Al00G0ZcdUs6Tn4aM58Ta7D0B20WS84o1874W04BQ4I25Lr13Tdhm28z0IQ46w5376Jl5on0Da25J3OO0jM4Qc70i6kA5NC0eL2Po3nb8Bx44F6EmabO49v0FP0S1dgl8ad4SR4F3
1Q80Tx4oV4z760Q4Az0zT0o52BG03l4LJ6yi6WE4bf0YH2lk2cj0VI4mg6XD6vh4CK0xe2MF3PW0uU6n97ky4u65pv1KX2nZ1UZ24P4k45nt4Py5U93NU0kW0fg2SD6hj5Mh47m6FF3mI0HK0GJ26a6IG48l4RH6gk3Ld0if0dV0q75Z85OY4qT4d53ox0Jz
0XV0M75f84cx4MT4X517202r1kk2Ni61O5PE4nH7KJ34l0Uf0Zg2oD6Tj4aI4Oe6zF2Ah00C1iZ1834W44BU4ly5i90B60WW3lW0IU46s5334I65Lv0gy1b93OK0jI4Qg6dD6Jh5oj0De25N3nf0Kd44B6Ei6kE5NG0eH2Pk1m80hx4SV4F76HY49r0FT0S5
60Uckl0zP0o135v2064oR4z36WA4bb0YL2lo2BC03h4LN6ym62d4CO0xa2MB2cn0VM4mc7Ha4u254z8RedTm3PS01Yb0DaQN64771w3NQ0kS8Lg24T4k05np47i6FB29d0HO0fc3Ca6hn5Ml4RL6godfr0ib0GN26e6IC48h45X4d1dEn8Cf0dR0q3hYtbeO
4nD7KF3ph0Uj1kg2Ne61C5PI4MX4X91s60vv0XZ2my5f44ct4lu5i52bx1Gz0yw2LT4W84BY4Oi6zJ2Ad00O0Zk2oH6Tf4aE6Jd5of0Di25B3OG0jE4Qk6dH6ix5Lz0gu1b528r0IY4rw5w75x65mW0FX0S91m40ht4SZ6fy6kI5NK0eD2Pg3nj0Kh44N6Ee
2BO03d4LB6ya6WM4bn1Ia2lc1Q00TpbUma4g5D24Ar87Ld1DdzM01U4Ns5K341654v1KP2nR2cb0VA4mo6XL62h4CC0xm2MN0fo2SL6hbbgr47e6FN29h0HC0Es24XaalbDn4Pq5U1ddO8bG10w0575Z05OQ45Tanm1O20Jr0GB26i6IO48d5Ba6gc3Ll0in
1kc2Na61G5PMbTs7KB34d0Un8QF39T5f04cp797aRm1s202z0ys2LP63v7664lq5i136U9Nf0Zo2oL6Tb4aA4Om6zN3QA00K3OC0jA4Qo6dL7ZA5ob0Dm25F28v9Pd4rs5w3aCnbfl0gq1b11m00hpbim72T5x249z32727w3nn0Kl44J6Ea6kM5NO11i2Pc
6WI4bj0YD2lg2BK0wh4LF6ye5D64Av0zX0o91Q40Tt4oZ6Zy41254r1KT2nVdzI01Q4Nw5K762l4CG0xi2MJ2cf0VE4mk6XH47a6FJ29l0HG0fk2SH6hf5Md4Pu5U53NY8bC0Ew2pT4k85nx45P4d91O60Jv0dZ0535Z45OU4RD6gg3Lh0ij0GF26m6IK5lI
4Op5J0eko00V0Zr2oQ40555u4ll6YO2ba0WB0yn2LM63k5Ra4MA6xb2CL02g0XC39I6VN4cmbTna5d1P30Us86Od0G5E15PP6kP5NR11t0441N10Kq44Waon6HL49g0FA27j3Mo0hm4SC72I6ia5Lc0gl2RO28k1Ya46f6GMhyVbEm0Dp1A0deL8cD4Qr5T2
0C90VX4mv5h662q4CZ0xt2MW3PF01L4Nj7kh6Ue54o1KI2nK2aJ0Ti4oG6Zd6tH4Ak0zE2Of1r50wu7806yx5g74bw0YY0L81Wz26p5y55lT4RY4G81l70iw0dG2Qd6jJ5OH45M6Df3oi0Jk0Ej24A6Kg5ne4Ph6eK3ND0kF0fv1c64H95My4st5v429q0HZ
0Zv2oU4014aX4Ot5J42Ay00R0yj2LI63o4BD4lh6YK2be0WF0XG2md6VJ4ci4ME6xf2CH02c1kz2Nx5E55PT4nYaqh1P70Uw1N50Ku44S6Ex6kT5NV0eY0403Mk0hi4SG6fd6HH49c0FE27n28o0ID46b6GI6ie5Lg0gh2RK3OZ0jX4Qv5T66Jy7O90Dt1A4
62u7750xp19837V9Oe4mr5h26Ua54k1KM2nO3PB01H4Nn7kl60D4Ao0zA2Ob2aN0Tm4oC7JA5g34bs8PE38W16903y784aSnbhn73W1l30is33426t5y148y45I6Db3om0Jo0dC3AA6jN5OL4Pl6eO8330kB0En24E6Kc5na47x52829u8AF0fr1c2aBmbgo
4ld6YG2bi0WJ0yf2LE63c4BH4Ox5J80a70tV0Zz2oY4t54aT4nU7KW34q1EZ1kv0n65E95PX4MI6xj2CD02o0XK2mh6VF4ce6HD49o0FI27b3Mg0he4SK6fh6kX5NZ0eU0p41N90Ky4pW4e64j75ow0Dx1A83OV0jT4Qz6dY6ii5Lk0gd2RG28c0IH46n6GE
3PN01D4NbaQS6Um54g1KA2nC0C10VP59Wa6G4V34CR85l19416503u4LS4Y2a9F56V0YQ0L02aB0Ta4oO6Zl60H4Ac0zM2On0dO2Ql6jBaU145E6Dn3oa0Jc0GS0R2acL48u4RQ4G0dfo94N12Wdin4H15Mq47t52429y0HR0Eb24I6Ko5nmaZ06eC3NL0kN
0yb2LA63g4BL58I6YC2bm0WN8SfdUn4094aPb1GaPM0a300Z1kr0n261VbzN4nQ7KS34u2150XO2ml6VB4ca4MM6xn3Sa02k3Mc0ha4SO6fl7Xa49k0FM27fdDm8Be4pS4e2aANbdL0eQ0483OR0jP65470t4j35os8Md25W28g0IL46j6GA6im5Lo13I2RC
6Ui54c1KE2nG3PJ0uH4Nf7kd4V74CV0xx1900C50VT4mz6XY6WX56R0YU0L416103q4LW4Y660L4Ag0zI2Oj2aF0Te4oK6Zh45A6Dj3oe0Jg0dK2Qh6jF5OD4RU4G43Ly1yZ0GW0R65y948q47p5203mT0HV0fz2SY4H55Mu4Pd6eG3NH0kJ0Ef24M6Kk5ni
5Y15LP13v0661L30Is46Uaml6JN5oL0DC25h3Om0jo4QA6db6kc5Na0en2PMdDR0KB44d6EOabm49T0Fr1C20978aF4Sp5V04Mr5H2dyL02T0Xp2mS42757w4nn7Kl34J1Ea1kM2NO61i5Pc4OC7jA2AN00e0ZA2ob6TL4ao58va7f1R10Wq84Md2E5G34Bs
0EY0P86KT5nVbjh6ex1n50ku0fE2Sf6hH5MJ47O6Fd29B0Hi0Gh26C6Ie48N4Rj6gI3LF0iD0dt1a46jy7o94qv5t63oZ0JX2ay0TZ4ot5j44T94AX0zv2OU2Be03N4Lh6yK6Wg4bD0Yj2lI2cH0Vk4mE6Xf62B4Ci0xG2Md1p70uw4NYaQh5e55pT1Kz2nx
1L70Iw46Q4g85Y55LT13r0623Oi0jk4QE6df6JJ5oH0DG25l3nD0KF4ph6EK6kg5Ne0ej2PI0930hZ4St5V44h949P0Fv1C60Xt2mW4234cZ4Mv5H60c902P1kI2NK61m5Pg4nj7Kh34N0UD0ZE2of6TH4ak4OG6zd2AJ00a0yY0l85G74Bw58r6Yx1R50Wu
bjl71U1n10kq31624v6KP5nR47K7VA29F0Hm0fA2Sb6hL5MN4Rn6gM3LB1ya0Gl26G6Ia48J45z5t2dEL8CD0dp1a0hYVbem60w7570zr2OQ35T9Mg4op5j06Wc56i0Yn2lM2Ba03J4Ll6yO62F4Cm0xCdwS2cL0Vo4mA6Xb5e154X8RGdTO1p30usb0faQl
6JF5oD0DK2qh3Oe0jg4QI6dj5Y95LX0gW0r628P1YZ4rU4g44h55mu0Fz27Q3MT0hV4Sx5V86kk5Ni0ef2PE3nH0KJ44l6EG4nf7Kd34B0UH1kE2NG61a5Pk4Mz6xY0c50vT0Xx39r4v74cV4lW4y61R90Wy0yU0l463P5RZ4OK6zh2AF00m0ZI2oj6TD4ag
0fM2Sn7xa5MB47G6Fl29J0Ha0EQ0P0aaNbDL4PS4E2ddm8be10Udkl4J35Os45v5063oR0JP1WA26K6Im48F4Rb6gA3LN0iL2Bm03FaF06yC6Wo4bL0Yb2lA0A30TRbUOa4E4T14AP87nd1f14701w4NQ7kShfu54T1Kr0N237i0Vc4mM6Xn62J4Ca0xO2Ml
3Oa0jc4QM6dn6JBa190DO25d28T9PF46Y4g0aCL6870gS0r23MP0hR67672v4h149X8Of27U3nL0KN44h6EC6ko5Nm0eb2PA1kA2NC61e5Po4nbaqS34F0UL8Qd39v4v34cRb3EaRO0c102X0yQ0l063TbxL4lS4y236w2370ZM2on7Da4ac4OO6zl2AB00i
47C6Fh29N0He0fI2Sj6hD5MF4PW4E61n90ky0EU0P46KX5nZ45r5023oV0JT0dx1a84J75Ow4Rf6gE3LJ0iH0Gd26O6Ii48B6Wk4bH0Yf2lE2Bi03B4Ld6yG4T54AT0zz2OY0A70TV4ox5j85e954P1Kv0N614301s4NU7kW62N4Ce0xK2Mh2cD0Vg4mI6Xj
4K05Np11Vdjo3nQ0KS44u5156Hn49E0Fc27H3MM0hO4Sa6fB6iC5LA0gN2Rm28I0Ib46D6GohytbEO0DR0Q3den8cf4QP4D14OR4Z315400t0ZP0O1hgv55W4lN6Ym2bC1GA0yL2Lo63I4Bb4Mc7ha2Cn02E0Xa2mB6Vl4cObTLa5F3pS0UQ86md0e4U25Pr
0Gy1B94i65lv5BZ6gX3LW0iU0de2QF6jh5Oj45o6DD3oK0JI0EH24c6KE5nG4PJ6ei3Nf0kd0fT0s56hY6904sV4f71M80Hx2cY0Vz4mT4x55F84Cx0xV0m73Pd01n4NH7kJ6UG54M1Kk2ni2ah0TK4oe6ZF60b4AI0zg2OD0b60wW4Ly5I94w44bU1IZ2lX
3nU0KW44q5114K45Nt11R2PX3MI0hK4Se6fF6Hj49A0Fg27L28M0If4rH6Gk6iG5LE0gJ2Ri3Ox0jz4QT4D55z85oY0DV0Q70ZT0O56TY4az4OV4Z715000p0yH2Lk63M4Bf4lJ6Yi2bG0Wd0Xe2mF6Vh4cK4Mg6xD2Cj02A1kX2NZ4U65Pv6N97Ky3pW0UU
66573u0880iQ8Ne26V4i25lr45k7Ta3oO0JM0da2QB6jl5On4PN6em3Nb8bx0EL24g6KA5nC47Z4f329W8Ad0fP079aBO69462WbyO0xR0m337t2244mP4x16UC54I1Ko2nmdzr01j4NL7kN60f4AM0zc9232al0TO4oa6ZB4384bQ8Pg38u0b20wSb2FaSL
6Hf49M0Fk2sH3ME0hG4Si6fJ4K85Nx0ew2PT3nY8BC4pu5u55z45oU0DZ25q1o60jv4QX4D96iK5LI0gF2Re28A0Ij46L6Gg4lF6Ye2bK0Wh0yD2Lg63A4Bj4OZ6zy1q40tt0ZX0O95d64av4nw5k734S0UY1kT2NV61p5Pz4Mk6xH2Cf02M0Xi2mJ6Vd4cG
0dm2QN7zA5Ob45g6DL3oC0JA0Gq1B1acn48W4Rs5W308494l12u0755X25MS47Valo1M00Hp1Ua24k6KM5nO4PB6ea3Nn0kl3Pl01fbts7kB6UO54E1Kc2na1S20Vr59ua6e5F04Cp85Nd3FdxO03W4Lq5I143456t0Ys2lP35I0TC4om6ZN60j4AA0zo2OL
3MA0hC4Sm6fN6Hb49I0Fo27DdDO8BG44y519aAlbdn0es2PP1o20jrbko70V5z05oQ30525u28E0In46H6Gc6iO5LM0gB2Ra1ia2Lc63E4Bn4lB6Ya2bO0Wl8SDdUL5d24arb1eaPo15800x1kP2NR61t7444ns5k334W9Ld0Xm2mN7FA4cC4Mo6xL2Cb02I
45c6DH3oG0JE0di2QJ6jd5Of4Rw5W70800iY0Gu1B56Ix48S47R6Fy1M40Ht0fX0715X65MW4PF6ee3Nj0kh0ED24o6KI5nK6UK54A1Kg2ne3Ph01b4ND7kF5F44Ct0xZ2My1S60Vv4mX4x94304bY0Yw2lT2Bx03S4Lu5I560n4AE0zk2OH2ad0TG4oi6ZJ]]
local CRC16 = '\0\0\16\33\32\66\48\99\64\132\80\165\96\198\112\231\129\8\145\41\161\74\177\107\193\140\209\173\225\206\241\239\18\49\2\16\50\115\34\82\82\181\66\148\114\247\98\214\147\57\131\24\179\123\163\90\211\189\195\156\243\255\227\222\36\98\52\67\4\32\20\1\100\230\116\199\68\164\84\133\165\106\181\75\133\40\149\9\229\238\245\207\197\172\213\141\54\83\38\114\22\17\6\48\118\215\102\246\86\149\70\180\183\91\167\122\151\25\135\56\247\223\231\254\215\157\199\188\72\196\88\229\104\134\120\167\8\64\24\97\40\2\56\35\201\204\217\237\233\142\249\175\137\72\153\105\169\10\185\43\90\245\74\212\122\183\106\150\26\113\10\80\58\51\42\18\219\253\203\220\251\191\235\158\155\121\139\88\187\59\171\26\108\166\124\135\76\228\92\197\44\34\60\3\12\96\28\65\237\174\253\143\205\236\221\205\173\42\189\11\141\104\157\73\126\151\110\182\94\213\78\244\62\19\46\50\30\81\14\112\255\159\239\190\223\221\207\252\191\27\175\58\159\89\143\120\145\136\129\169\177\202\161\235\209\12\193\45\241\78\225\111\16\128\0\161\48\194\32\227\80\4\64\37\112\70\96\103\131\185\147\152\163\251\179\218\195\61\211\28\227\127\243\94\2\177\18\144\34\243\50\210\66\53\82\20\98\119\114\86\181\234\165\203\149\168\133\137\245\110\229\79\213\44\197\13\52\226\36\195\20\160\4\129\116\102\100\71\84\36\68\5\167\219\183\250\135\153\151\184\231\95\247\126\199\29\215\60\38\211\54\242\6\145\22\176\102\87\118\118\70\21\86\52\217\76\201\109\249\14\233\47\153\200\137\233\185\138\169\171\88\68\72\101\120\6\104\39\24\192\8\225\56\130\40\163\203\125\219\92\235\63\251\30\139\249\155\216\171\187\187\154\74\117\90\84\106\55\122\22\10\241\26\208\42\179\58\146\253\46\237\15\221\108\205\77\189\170\173\139\157\232\141\201\124\38\108\7\92\100\76\69\60\162\44\131\28\224\12\193\239\31\255\62\207\93\223\124\175\155\191\186\143\217\159\248\110\23\126\54\78\85\94\116\46\147\62\178\14\209\30\240'
local clock = redis.call('TIME')
local now = clock[1] * 1000000 + clock[2]
local fresh, answer     -- the buckets a fast path below created, and its answer

-- Milliseconds are capped at FOREVER_MS (3170 years): past 1e14 a number no
-- longer reaches Redis as an integer (PX gets "1e+14"; replies overflow).
local FOREVER_MS = 99999999999999

-- The single-item path (Acquire and Peek: nearly every call) is written out
-- in line, before the helpers of the many-item path: in Redis every call
-- runs the whole chunk, so each `local function` above the return is a
-- closure built on every call. Measured with redis-benchmark (100k keys,
-- three rounds each): through ten helpers 7.84 us per call, in line 7.37.
-- Its formulas are those of level(), until_full(), window() and micro()
-- below, which the many-item path uses; change them together.
--
-- Its common case comes first, before any helper is built: a take that is
-- granted, or a peek, of a bucket that is full (no key) or holds a 24-byte
-- state of this version or older, stamped no later than now, that needs
-- no folding across rate edits. Building the five helpers below (state()
-- to retry_after()) cost a lone Acquire 9.9k of its 86.8k instructions
-- (tests/bench/redis-cost.sh). Every other single item (a denial, a rate
-- history to fold, a clock that stepped back, a state of another version
-- or shape) goes on after them, to the rest of the path.
local lone = n == 1 and (mode == 'take' or mode == 'peek')
local ver, max, rate, rates, want, rkey, s     -- the lone item's (read once)
if lone then
  ver, max, rate, rates = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
  want = ARGV[base + 1]
  want = want == '1' and 1 or tonumber(want)    -- no strtod() for the usual 1
  -- record_key() and replay() below, in line (see above)
  local rid = per == 4 and ARGV[base + 2]
  rkey = mode == 'take' and rid and rid ~= '' and KEYS[1] .. '\31r' .. rid
  if rkey then
    local rec = redis.call('GET', rkey)
    if rec then
      local flags = unpack_state('<d', rec, 73)
      if flags % 2 == 0 then
        flags = flags + REPLAYED
      end
      return sub(rec, 1, 72) .. pack('<d', flags) .. sub(rec, 81)
    end
  end
  if want > max then
    return pack(ANSWER, -11, 0, 0, max, 0, 0, 0, 0, 0, 0, NOLEASE)
  end
  s = redis.call('GET', KEYS[1])
  local tokens, since, written = max, now, ver
  if s and #s == 24 then
    tokens, since, written = unpack_state(STATE, s)
  end
  if (not s or #s == 24) and written <= ver and since <= now and (rates == '' or tokens >= max) then
    if tokens < max then            -- level(), in line
      local elapsed = now - since
      if elapsed >= (max - tokens) * 1000000 / rate then
        tokens = max
      elseif elapsed > 0 then
        tokens = tokens + elapsed * rate / 1000000
        if tokens > max then
          tokens = max
        end
      end
    elseif tokens > max then
      tokens = max
    end
    if mode == 'peek' or tokens >= want then
      if mode == 'take' then
        tokens = tokens - want
      end
      local ttl = 0                 -- until_full()
      if tokens < max then
        ttl = ceil((max - tokens) * 1000 / rate)
        if ttl > FOREVER_MS then
          ttl = FOREVER_MS
        end
      end
      if mode == 'take' and ttl > 0 then    -- save(); the ttl as text (see FOREVER_MS)
        redis.call('SET', KEYS[1], pack(STATE, tokens, now, ver), 'PX', format('%d', ttl))
        if not s then
          fresh = KEYS              -- a new bucket: indexed below (see the top)
        end
      elseif mode == 'take' and s then
        redis.call('DEL', KEYS[1])
      end
      local w = ceil(max / rate)    -- window()
      if w > FOREVER_MS then
        w = FOREVER_MS
      end
      local m = floor(tokens * 1000000) -- micro()
      if m > 9007199254740992 then
        m = 9007199254740992
      end
      local rec = pack(ANSWER, 0, 1, floor(tokens), max, 0, ttl, w, m, 0, 0, NOLEASE)
      if rkey then
        redis.call('SET', rkey, rec, 'PX', ridttl)
      end
      if not fresh then
        return rec
      end
      answer = rec
    end
  end
end

-- The many-item path's common case, also before any helper is built (issue
-- 41): a compact call of takes, peeks or an "all" whose items all name
-- policy 1 with whole permits from 1 to max_permits, each bucket full or
-- holding a state as the lone path's common case above takes it, and
-- every take granted. Its formulas are the lone path's (level(),
-- until_full(), window(), micro() below); items that share a bucket see
-- each other's takes (the bucket's tokens carried in `left`, at its first
-- item); each bucket is written once, in the order first named, as the
-- many-item path below writes it; and the answers are packed in one
-- struct.pack per 100 items instead of one each and a concat (a pack costs
-- Redis ~500 instructions a call and ~340 a number). Nothing is written
-- until every item is decided: the first item that is not this case (a
-- denial, an error, a state to fold or of another shape, a clock stepped
-- back) sends the whole call on to the many-item path, which reads the
-- states read here (`states`) and decides it afresh. At nine items a call
-- this costs Redis 2/3 of what the many-item path does
-- (tests/bench/RESULTS-redis-cost.md).
local states            -- the items' states, once read (in item order)
if n > 1 and per == 2 and (mode == 'take' or mode == 'peek' or mode == 'all') then
  if keys == KEYS then
    states = redis.call('MGET', unpack(KEYS))
  else
    -- one slot per command; every key read before any is written (the top)
    states = {}
    for i = 1, n do
      states[i] = redis.call('GET', keys[i])
    end
  end
  local pver, pmax, prate, prates = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
  local w = ceil(pmax / prate)      -- window()
  if w > FOREVER_MS then
    w = FOREVER_MS
  end
  local vals, left, last_ttl, firsts, seen = {}, {}, {}, {}, n > 16 and {}
  local ok = true
  for i = 1, n do
    local at = base + 2 * (i - 1)
    local want = ARGV[at + 1]
    want = want == '1' and 1 or tonumber(want)
    if ARGV[at] ~= '1' or not want or want < 1 or want > pmax or want % 1 ~= 0 then
      ok = false
      break
    end
    -- f: the first item of this item's bucket (a few items: compared, the
    -- strings being interned; many: a table)
    local k, f = keys[i], i
    if seen then
      f = seen[k] or i
      seen[k] = f
    else
      for x = 1, i - 1 do
        if keys[x] == k then
          f = x
          break
        end
      end
    end
    local tokens
    if f < i then
      tokens = left[f]
    else
      tokens = pmax
      local s = states[i]
      if s then
        if #s ~= 24 then
          ok = false
          break
        end
        local since, written
        tokens, since, written = unpack_state(STATE, s)
        if written > pver or since > now or (prates ~= '' and tokens < pmax) then
          ok = false
          break
        end
        if tokens < pmax then       -- level(), in line
          local elapsed = now - since
          if elapsed >= (pmax - tokens) * 1000000 / prate then
            tokens = pmax
          elseif elapsed > 0 then
            tokens = tokens + elapsed * prate / 1000000
            if tokens > pmax then
              tokens = pmax
            end
          end
        elseif tokens > pmax then
          tokens = pmax
        end
      end
      firsts[#firsts + 1] = i
    end
    if mode ~= 'peek' then
      if tokens < want then
        ok = false                  -- a denial: the many-item path
        break
      end
      tokens = tokens - want
    end
    local ttl = 0                   -- until_full()
    if tokens < pmax then
      ttl = ceil((pmax - tokens) * 1000 / prate)
      if ttl > FOREVER_MS then
        ttl = FOREVER_MS
      end
    end
    left[f], last_ttl[f] = tokens, ttl  -- the bucket's after this item (its write's)
    -- floor() of a number >= 0 as x - x % 1, exactly the same number,
    -- without a call of math.floor
    local m = tokens * 1000000          -- micro()
    m = m - m % 1
    if m > 9007199254740992 then
      m = 9007199254740992
    end
    local v = 8 * i
    vals[v - 7], vals[v - 6], vals[v - 5], vals[v - 4] = 0, 1, tokens - tokens % 1, pmax
    vals[v - 3], vals[v - 2], vals[v - 1], vals[v] = 0, ttl, w, m
  end
  if ok then
    if mode ~= 'peek' then
      local call = redis.call
      for x = 1, #firsts do
        local i = firsts[x]
        local ttl = last_ttl[i]
        if ttl > 0 then
          call('SET', keys[i], pack(STATE, left[i], now, pver), 'PX', format('%d', ttl))
          if not states[i] then
            fresh = fresh or {}
            fresh[#fresh + 1] = keys[i]
          end
        elseif states[i] then
          redis.call('DEL', keys[i])
        end
      end
    end
    local parts = {}
    for c = 0, n - 1, 100 do
      local e = c + 100 < n and c + 100 or n
      parts[#parts + 1] = pack('<' .. string.rep('dddddddd', e - c), unpack(vals, 8 * c + 1, 8 * e))
    end
    answer = parts[2] and table.concat(parts) or parts[1]
    if not fresh then
      return answer
    end
  end
end

local bxor, band, lshift, rshift, byte = bit.bxor, bit.band, bit.lshift, bit.rshift,
                                        string.byte

local INDEX_BLOB = 512       -- bytes: a blob an add takes past this has one split (see the top)
local INDEX_ENTRY_MAX = 128  -- bytes: a longer entry goes to the set of its slot
local SWEEP_BLOBS = 16       -- blobs: what one "sweep" call reads of a list

-- The slot of key (CRC16 of its hash tag, as Redis computes it) and the
-- tag's braces; nil for a key without a hash tag (none of permitd's).
local function tag_slot(key)
  local lb = find(key, '{', 1, true)
  local rb = lb and find(key, '}', lb + 2, true)
  if not rb then
    return nil
  end
  local crc = 0
  for i = lb + 1, rb - 1 do
    local x = 2 * bxor(rshift(crc, 8), byte(key, i))
    local hi, lo = byte(CRC16, x + 1, x + 2)
    crc = bxor(band(lshift(crc, 8), 65535), hi * 256 + lo)
  end
  return band(crc, 16383), lb, rb
end

-- INDEX_TAGS' tag of slot s.
local function slot_tag(s)
  local at = 3 * s + floor(s / 64) + 1
  return sub(INDEX_TAGS, at, at + 2)
end

-- The set of key's slot (see the top): P{T}ix:NAME.
local function index_set(key, slot, lb, rb)
  local c = find(key, ':', lb + 1, true)
  if not c or c > rb then
    c = rb
  end
  return sub(key, 1, lb) .. slot_tag(slot) .. '}ix:' .. sub(key, lb + 1, c - 1)
end

-- The name of key's policy and the entry that stands for key in its
-- group's list (see the top); nil for a key of none of the three forms,
-- whose KEY holds a control character (the markers are, and "\n" ends an
-- entry), or whose entry is longer than INDEX_ENTRY_MAX: such a key goes
-- to the set of its slot.
local function index_entry(key, lb, rb)
  local c = find(key, '[:}]', lb + 1)
  local name, body, entry = sub(key, lb + 1, c - 1), nil, nil
  if c < rb then
    if #key - 3 <= c or sub(key, -3) ~= '}:k' then
      return nil
    end
    body = sub(key, c + 1, #key - 3)
    entry = body
  elseif sub(key, rb + 1) == ':b' then
    return name, '\2'
  elseif sub(key, rb + 1, rb + 3) == ':k:' and #key > rb + 3 then
    body = sub(key, rb + 4)
    entry = '\1' .. body
  else
    return nil
  end
  if c == lb + 1 or #entry > INDEX_ENTRY_MAX or find(body, '[%z\1-\31]') then
    return nil
  end
  return name, entry
end

-- Whether r, what a redis.pcall answered, is an error.
local function failed(r)
  return type(r) == 'table' and r.err ~= nil
end

-- An entry's hash, which picks its blob in the group's list (linear
-- hashing, see the top): a polynomial modulo 2^31 - 1, exact in a double.
local function entry_hash(entry)
  local h = 0
  for i = 1, #entry do
    h = (h * 131 + byte(entry, i)) % 2147483647
  end
  return h
end

-- The blob of group g's list that holds an entry of hash h (linear
-- hashing over the list's length, see the top).
local function blob_of(g, h)
  local len = g.len
  if len <= 1 then
    return 0
  end
  local size = 1
  while size * 2 <= len do
    size = size * 2
  end
  local i = h % size
  if i < len - size then
    i = h % (2 * size)
  end
  return i
end

-- Blob i of group g as this call sees it ({text =, dirty =}), read once
-- (LINDEX); a blob past the list's stored end is one this call makes. nil
-- when Redis refuses the read (the group then falls back, see
-- index_update()).
local function blob(g, i)
  local b = g.blobs[i]
  if b then
    return b
  end
  local text = '\n'
  if i < g.stored then
    text = redis.pcall('LINDEX', g.key, i)
    if type(text) ~= 'string' then
      g.broken = true
      return nil
    end
  end
  b = {text = text, dirty = i >= g.stored}
  g.blobs[i] = b
  return b
end

-- The list of key's group in index_update()'s call (its name, its length,
-- the blobs read and changed, the keys added), made on first use in ix,
-- and key's entry; nil when key goes to the set of its slot (no entry, or
-- a group whose slot this node does not serve).
local function index_group(ix, key, slot, lb, rb)
  local name, entry = index_entry(key, lb, rb)
  if not name then
    return nil
  end
  local gk = sub(key, 1, lb) .. slot_tag(slot - slot % 64) .. '}il:' .. name
  local g = ix.groups[gk]
  if g == nil then
    local len = redis.pcall('LLEN', gk)
    g = false                       -- a slot this node does not serve
    if type(len) == 'number' then
      g = {key = gk, stored = len, len = len > 0 and len or 1, blobs = {}, keys = {},
           added = 0, removed = 0}
      ix.order[#ix.order + 1] = g
    end
    ix.groups[gk] = g
  end
  if not g then
    return nil
  end
  return g, entry
end

-- Splits blob p of group g (see the top): its entries whose hash picks
-- 2^k + p at the next level go to a new blob at the list's end.
local function index_split(g)
  local size = 1
  while size * 2 <= g.len do
    size = size * 2
  end
  local p = g.len - size
  local b = blob(g, p)
  if not b then
    return false
  end
  local keep, move = {''}, {''}
  for entry in gmatch(b.text, '[^\n]+') do
    if entry_hash(entry) % (2 * size) == p then
      keep[#keep + 1] = entry
    else
      move[#move + 1] = entry
    end
  end
  keep[#keep + 1], move[#move + 1] = '', ''
  b.text, b.dirty = table.concat(keep, '\n'), true
  g.blobs[g.len] = {text = table.concat(move, '\n'), dirty = true}
  g.len = g.len + 1
  return true
end

-- Writes what index_update() changed of group g: the blobs past the
-- stored end in one RPUSH (in order: a split's new blob is the next
-- index), then an LSET of each changed one. false when Redis refused one.
local function index_flush(g)
  local new = {'RPUSH', g.key}
  for i = g.stored, g.len - 1 do
    new[#new + 1] = g.blobs[i] and g.blobs[i].text    -- none: an empty list only dropped from
  end
  if #new > 2 and failed(redis.pcall(unpack(new))) then
    return false
  end
  for i, b in pairs(g.blobs) do
    if i < g.stored and b.dirty and failed(redis.pcall('LSET', g.key, i, b.text)) then
      return false
    end
  end
  return true
end

-- Whether a blob of group g this call read or made is past INDEX_BLOB.
local function overfull(g)
  for _, b in pairs(g.blobs) do
    if #b.text > INDEX_BLOB then
      return true
    end
  end
  return false
end

-- Puts the keys of adds into the index and takes the keys of drops out of
-- it (see the top); with migrate, a key added to its group's list leaves
-- the set of its slot. A list's blobs are read once and written once a
-- call; then the splits, at most 8 and one per 16 adds a call. Answers the
-- entries added and the entries removed.
local function index_update(adds, drops, migrate)
  local ix = {groups = {}, order = {}}
  local added, removed, splits = 0, 0, 8 + floor((adds and #adds or 0) / 16)

  for i = 1, adds and #adds or 0 do
    local key = adds[i]
    local slot, lb, rb = tag_slot(key)
    local g, entry, b
    if slot then
      g, entry = index_group(ix, key, slot, lb, rb)
    end
    b = g and not g.broken and blob(g, blob_of(g, entry_hash(entry)))
    if b then
      if not find(b.text, '\n' .. entry .. '\n', 1, true) then
        b.text, b.dirty = b.text .. entry .. '\n', true
        g.added = g.added + 1
      end
      g.keys[#g.keys + 1] = key
    elseif g then
      g.keys[#g.keys + 1] = key     -- into the sets once the group is known broken
    elseif slot then
      local r = redis.pcall('SADD', index_set(key, slot, lb, rb), key)
      added = added + (type(r) == 'number' and r or 0)
    end
  end
  for i = 1, drops and #drops or 0 do
    local key = drops[i]
    local slot, lb, rb = tag_slot(key)
    if slot then
      local g, entry = index_group(ix, key, slot, lb, rb)
      local b = g and g.stored > 0 and not g.broken and blob(g, blob_of(g, entry_hash(entry)))
      local at = b and find(b.text, '\n' .. entry .. '\n', 1, true)
      if at then
        b.text, b.dirty = sub(b.text, 1, at) .. sub(b.text, at + #entry + 2), true
        g.removed = g.removed + 1
      end
      local r = redis.pcall('SREM', index_set(key, slot, lb, rb), key)
      removed = removed + (type(r) == 'number' and r or 0)
    end
  end
  for _, g in ipairs(ix.order) do
    while not g.broken and splits > 0 and overfull(g) and index_split(g) do
      splits = splits - 1
    end
    if not g.broken and index_flush(g) then
      added, removed = added + g.added, removed + g.removed
      for _, key in ipairs(migrate and g.keys or {}) do
        local slot, lb, rb = tag_slot(key)
        redis.pcall('SREM', index_set(key, slot, lb, rb), key)
      end
    else                            -- the group's slot moved since its LLEN, or another type
      for _, key in ipairs(g.keys) do
        local slot, lb, rb = tag_slot(key)
        local r = redis.pcall('SADD', index_set(key, slot, lb, rb), key)
        added = added + (type(r) == 'number' and r or 0)
      end
    end
  end
  return added, removed
end

-- index: see the top.
if mode == 'index' then
  local live, dead = {}, {}
  for i = 1, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then
      live[#live + 1] = KEYS[i]
    else
      dead[#dead + 1] = KEYS[i]
    end
  end
  return struct.pack('<dd', index_update(live, dead, true))
end

-- The bucket key that entry of policy head ("P{NAME") stands for.
local function entry_key(head, entry)
  local c = byte(entry)
  if c == 1 then
    return head .. '}:k:' .. sub(entry, 2)
  elseif c == 2 then
    return head .. '}:b'
  end
  return head .. ':' .. entry .. '}:k'
end

-- sweep: see the top (KEYS[1]: a group's list, or a container or "k p" of
-- the hashes before it; ARGV[3]: the list's first blob to read; ARGV[4]
-- "1": the caller's sweeps of this list kept nothing before it).
if mode == 'sweep' then
  local ck = KEYS[1]
  local lb = find(ck, '{', 1, true)
  local at = lb and find(ck, '}i[lg]:', lb)
  if not at or n ~= 1 then
    return redis.error_reply('bucket.lua: sweep takes one list of the bucket index, not "' ..
                             tostring(ck) .. '"')
  end
  local kept, removed = 0, 0
  if sub(ck, at + 2, at + 2) == 'g' then
    -- The hashes of before the lists: a container's live entries go into
    -- their group's list (or set), the container goes; a "k p" goes once
    -- no container of it is left.
    local last = find(ck, ':%d+$', at + 4)
    if not last then
      local k, p = string.match(redis.call('GET', ck) or '', '^(%d+) (%d+)$')
      if not k or tonumber(k) > 16 then
        return pack('<ddd', 0, 0, 0)
      end
      for i = 0, 2 ^ tonumber(k) + tonumber(p) - 1 do
        if redis.call('EXISTS', ck .. ':' .. i) == 1 then
          return pack('<ddd', 0, 0, 0)
        end
      end
      redis.call('DEL', ck)
      return pack('<ddd', 0, 0, 0)
    end
    local head, live, done = sub(ck, 1, lb) .. sub(ck, at + 4, last - 1), {}, {'HDEL', ck}
    for _, entry in ipairs(redis.call('HKEYS', ck)) do
      local key = entry_key(head, entry)
      local e = redis.pcall('EXISTS', key)
      if e == 0 then
        removed = removed + 1
      elseif e == 1 then
        live[#live + 1] = key
      end
      if e == 0 or e == 1 then      -- a bucket of a slot this node does not serve: left
        done[#done + 1] = entry
      else
        kept = kept + 1
      end
    end
    index_update(live)
    if #done > 2 then
      redis.call(unpack(done))
    end
    return pack('<ddd', kept + #live, removed, 0)
  end
  local head, first = sub(ck, 1, lb) .. sub(ck, at + 4), tonumber(ARGV[3]) or 0
  local blobs = redis.call('LRANGE', ck, first, first + SWEEP_BLOBS - 1)
  for i, text in ipairs(blobs) do
    local live, before = {''}, removed
    for entry in gmatch(text, '[^\n]+') do
      if redis.pcall('EXISTS', entry_key(head, entry)) == 0 then
        removed = removed + 1
      else
        live[#live + 1] = entry     -- a bucket of a slot this node does not serve: kept
      end
    end
    kept = kept + #live - 1
    live[#live + 1] = ''
    if removed > before then
      redis.call('LSET', ck, first + i - 1, table.concat(live, '\n'))
    end
  end
  local next_blob = first + #blobs
  if next_blob >= redis.call('LLEN', ck) then
    next_blob = 0
    if ARGV[4] == '1' and kept == 0 then     -- every blob empty: the list goes
      local empty = true
      for _, text in ipairs(redis.call('LRANGE', ck, 0, -1)) do
        empty = empty and text == '\n'
      end
      if empty then
        redis.call('DEL', ck)
      end
    end
  end
  return pack('<ddd', kept, removed, next_blob)
end

-- The buckets a fast path above created, into their index (see the top).
if fresh then
  index_update(fresh)
  return answer
end


-- What both the rest of the single-item path and the many-item path need:
-- state(), level(), retry_after().

-- The tokens, their time and the version stamp they were written under in
-- state s, or nil and its size when s is not a state this script wrote.
-- Such an item answers -15 and its key is left as it is for the operator:
-- guessing would grant or refuse on garbage. It fails no other item of the
-- call (permitd sends the Acquires of one policy that arrive together as
-- one call). A 16-byte state is one written before version stamps (see the
-- top): stamp 0.
local function state(s)
  local len = #s
  if len == 24 then
    local tokens, since, ver = unpack_state(STATE, s)
    return tokens, since, ver
  elseif len == 16 then
    local tokens, since = unpack_state('<dd', s)
    return tokens, since, 0
  end
  return nil, len
end

-- The time of the newest rate edit in a policy's `rates` (see the top), or
-- nil when the field does not start with one.
local function newest(rates)
  local c = find(rates, ':', 1, true)
  return c and tonumber(sub(rates, 1, c - 1))
end

-- A bucket that held `stored` (< max) at `since`, brought to the newest
-- edit in `rates` (which is later than since): its tokens then, and that
-- time. Each segment accrues at the rate in force in it, capped at max as
-- level() caps: elapsed time is compared with the time to fill before it is
-- multiplied. Deterministic in (stored, since, rates), so every decision
-- that reads the same state folds it to the same bits, and level() carries
-- on from there at the policy's rate. nil when `rates` is not a history
-- sync.lua wrote (the item answers internal).
local function fold(stored, since, max, rates)
  local ts, rs, n = {}, {}, 0
  for t, r in gmatch(rates, '([^:;]+):([^;]*)') do
    n = n + 1
    ts[n], rs[n] = tonumber(t), tonumber(r)
    if not ts[n] or not rs[n] or rs[n] <= 0 or rs[n] ~= rs[n] or (n > 1 and ts[n] >= ts[n - 1]) then
      return nil
    end
  end
  if n == 0 then
    return nil
  end
  local x = stored
  for i = n, 1, -1 do
    local t = ts[i]
    if t > since then
      local r = rs[i]
      if x >= max or t - since >= (max - x) * 1000000 / r then
        return max, ts[1]
      end
      x = x + (t - since) * r / 1000000
      if x >= max then
        return max, ts[1]
      end
      since = t
    end
  end
  return x, since
end

-- Tokens at time `at` of a bucket that held `stored` at `since` (nil: full).
-- The elapsed time is capped at the time the bucket takes to fill before it
-- is multiplied, so a bucket idle for years stays exact (Lua numbers are
-- doubles) and simply reads as full. Monotone in `at`, which is what makes
-- retry_after_ms trustworthy.
local function level(stored, since, max, rate, at)
  if not stored or stored >= max then
    return max
  end
  local elapsed = at - since
  if elapsed <= 0 then
    return stored
  end
  if elapsed >= (max - stored) * 1000000 / rate then
    return max
  end
  local t = stored + elapsed * rate / 1000000
  if t > max then
    return max
  end
  return t
end

-- Milliseconds until a bucket that held `stored` at `since` (holding
-- `tokens` now) holds `want`, rounded up. The wait is computed, then checked
-- against the very function the next decision will use, so a client that
-- waits retry_after_ms is admitted (barring others taking the tokens first).
local function retry_after(stored, since, max, rate, tokens, want)
  local wait = ceil((want - tokens) * 1000000 / rate)
  local step = 1
  while level(stored, since, max, rate, now + wait) < want do
    -- growing steps: past 2^53 us (285 years) wait + 1 == wait, and +1
    -- steps would spin forever, holding Redis
    wait = wait + step
    step = step * 2
  end
  local ms = ceil(wait / 1000)
  if ms > FOREVER_MS then
    return FOREVER_MS
  end
  return ms
end

-- refund (issue 38): permits given back, in lua/lib/refund_bucket.lua.
if mode == 'refund' or mode == 'charge' then
  -- @include refund_bucket.lua
end

-- The rest of the single-item path (its common case is above: its
-- arguments, request id and state are read there).
if lone then
  local stored, since, skewed
  if s then
    local written
    stored, since, written = state(s)
    if not stored then
      return pack(ANSWER, -15, 0, since, max, 0, 0, 0, 0, 0, 0, NOLEASE)
    elseif written > ver then
      return pack(ANSWER, STALE, 0, written, max, 0, 0, 0, 0, 0, 0, NOLEASE)
    end
    if rates ~= '' and stored < max then  -- idle across rate edits: see the top
      local top = newest(rates)
      if not top or since < top then
        stored, since = fold(stored, since, max, rates)
        if not stored then
          return pack(ANSWER, -13, 0, 0, 0, 0, 0, 0, 0, 0, 0, NOLEASE)
        end
      end
    end
    if since > now then
      since, skewed = now, true     -- see bucket()
    end
  end
  local tokens = level(stored, since, max, rate, now)
  local retry, write = 0, false
  if mode == 'take' and tokens >= want then
    tokens, write = tokens - want, true
  elseif mode == 'take' then
    -- Denied: nothing is taken (a state from the future is re-stamped).
    retry, write = retry_after(stored, since, max, rate, tokens, want), skewed
  end
  local ttl = 0                     -- until_full()
  if tokens < max then
    ttl = ceil((max - tokens) * 1000 / rate)
    if ttl > FOREVER_MS then
      ttl = FOREVER_MS
    end
  end
  if write and ttl > 0 then         -- save()
    redis.call('SET', KEYS[1], pack(STATE, tokens, now, ver), 'PX', ttl)
    if not s then
      index_update({KEYS[1]})       -- a new bucket (see the top)
    end
  elseif write and s then
    redis.call('DEL', KEYS[1])
  end
  local w = ceil(max / rate)        -- window()
  if w > FOREVER_MS then
    w = FOREVER_MS
  end
  local m = floor(tokens * 1000000) -- micro()
  if m > 9007199254740992 then
    m = 9007199254740992
  end
  local rec = pack(ANSWER, 0, retry == 0 and 1 or 0, floor(tokens), max, retry, ttl, w, m, 0, 0, NOLEASE)
  if rkey and retry == 0 then       -- allowed: a denial keeps no record (see the top)
    redis.call('SET', rkey, rec, 'PX', ridttl)
  end
  return rec
end

-- The many-item path's helpers.

-- The request-id helpers, built only in a call that carries a request id
-- (`any` below: a closure built on every call costs every call):
-- record_key(i, key), the record key of item i's request id, or false
-- when it has none or the mode keeps none (see the top); replay(rec), a
-- kept RECORD answered again, flags |= REPLAYED.
local record_key, replay

-- A state (stored, since) of a policy whose rate history is `rates` (false:
-- none), brought to its newest edit when it predates it (fold()); nil when
-- the history is not one sync.lua wrote.
local function refold(stored, since, max, rates)
  if rates and stored < max then
    local top = newest(rates)
    if not top or since < top then
      return fold(stored, since, max, rates)
    end
  end
  return stored, since
end

local function until_full(max, rate, tokens)
  if tokens >= max then
    return 0
  end
  local ms = ceil((max - tokens) * 1000 / rate)
  if ms > FOREVER_MS then
    return FOREVER_MS
  end
  return ms
end

-- The seconds an empty bucket takes to fill.
local function window(max, rate)
  local s = ceil(max / rate)
  if s > FOREVER_MS then
    return FOREVER_MS
  end
  return s
end

-- Tokens in millionths of a permit, capped where doubles stop being whole
-- numbers (2^53), so the reply stays an exact integer.
local function micro(t)
  local m = floor(t * 1000000)
  if m > 9007199254740992 then
    return 9007199254740992
  end
  return m
end

-- settle: the policy's max_permits or rate was edited (lua/sync.lua tells
-- permitd, which reads the policy's bucket index and sends them here, a page
-- at a time: KEYS the buckets, ARGV[2..7] "1", the request-id ttl (unused)
-- and the policy's limits as for items, no items). A bucket's key was set to
-- expire when it would be full under the limits of its last write; under
-- slower ones (a lower rate, a higher max) that is too soon, and a missing
-- key reads as full. Each bucket named is set to expire when it would be
-- full under the policy's limits now, its key removed when it is full
-- already; its state stays as it is, save that a state stamped before the
-- newest rate edit is rewritten as of now (its tokens folded across the
-- edits: the same number a decision would read). A bucket written under a
-- newer version than ARGV's is left as it is (its writer had newer limits).
-- A key that holds no state (a bucket gone full since the index named it)
-- leaves its index (see the top). Answers '<ddd' {buckets set, keys
-- removed, index members removed}.
if mode == 'settle' then
  local ver, max, rate, rates = tonumber(ARGV[4]), tonumber(ARGV[5]),
                                tonumber(ARGV[6]), ARGV[7]
  if rates == '' then
    rates = false
  end
  if not max or not rate or max < 1 or rate <= 0 or rate ~= rate then
    return pack('<ddd', 0, 0, 0)
  end
  local states = redis.call('MGET', unpack(KEYS))
  local set, removed, drops = 0, 0, {}
  for i = 1, n do
    local stored, since, written = false, 0, 0
    if states[i] then
      stored, since, written = state(states[i])
    else
      drops[#drops + 1] = KEYS[i]
    end
    -- A bucket stamped before the newest rate edit is written as of now,
    -- its tokens folded across the edits (then no bucket is stamped before
    -- that edit, and sync.c has sync.lua "trim" the history up to it); a
    -- history that is not sync.lua's leaves the key as it is.
    local tokens, at = nil, since
    if stored and written <= ver then
      tokens, at = refold(stored, since, max, rates)
    end
    if tokens then
      local moved = at ~= since
      if at > now then
        at = now
      end
      tokens = level(tokens, at, max, rate, now)
      local ttl = until_full(max, rate, tokens)
      if ttl > 0 and moved then
        redis.call('SET', KEYS[i], pack(STATE, tokens, now, ver), 'PX', ttl)
        set = set + 1
      elseif ttl > 0 then
        redis.call('PEXPIRE', KEYS[i], ttl)
        set = set + 1
      else
        redis.call('DEL', KEYS[i])
        removed = removed + 1
        drops[#drops + 1] = KEYS[i]
      end
    end
  end
  local _, gone = index_update(nil, drops)
  return pack('<ddd', set, removed, gone)
end

-- Many items: each policy's limits are read once per call and shared by
-- the items that name it, and so are buckets; every bucket's state comes
-- in one MGET.
local policies, buckets = {}, {}
local written = {}      -- the buckets in the order first read: they are written in it
if states then
  -- read by the fast path above, which sent the call on
elseif keys == KEYS then
  states = redis.call('MGET', unpack(KEYS))
else
  -- one slot per command; every key read before any is written (the top)
  states = {}
  for i = 1, n do
    states[i] = redis.call('GET', keys[i])
  end
end
-- The items' request-id records, read with the states (before any write).
-- Most calls carry none: then no item is looked up (a request id costs
-- only the calls that carry one; an item without reads nil: none).
local rkeys, replayed = {}, {}
local any = false
if mode ~= 'peek' and per == 4 then
  for i = 1, n do
    if ARGV[base + 4 * (i - 1) + 2] ~= '' then
      any = true
      break
    end
  end
end
if any then
  record_key = function(i, key)
    local rid = per == 4 and ARGV[base + 4 * (i - 1) + 2]
    if (mode ~= 'take' and mode ~= 'all') or not rid or rid == '' then
      return false
    end
    return key .. '\31r' .. rid
  end
  replay = function(rec)
    local flags = unpack_state('<d', rec, 73)
    if flags % 2 == 0 then
      flags = flags + REPLAYED
    end
    return sub(rec, 1, 72) .. pack('<d', flags) .. sub(rec, 81)
  end
  for i = 1, n do
    rkeys[i] = record_key(i, keys[i])
    replayed[i] = rkeys[i] and redis.call('GET', rkeys[i])
  end
end

local function policy(j)
  local p = policies[j]
  if not p then
    local at = 4 + 4 * (j - 1)
    local max, rate, rates = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), ARGV[at + 3]
    p = {ver = tonumber(ARGV[at]), max = max, rate = rate, rates = rates ~= '' and rates,
         window = window(max, rate)}
    policies[j] = p
  end
  return p
end

-- Item i's bucket, shared with the items before it that name the same key:
-- {stored, since} is the state the next decision will read (after this
-- call's takes), orig_* what the key held before (brought to policy p's
-- newest rate edit when stamped before it: see the top); {foreign = size}
-- when the key holds what this script did not write (see state()),
-- {broken = true} when p's rate history is not one sync.lua wrote,
-- {stale = stamp} when it was written under a newer version than p's.
--
-- Redis TIME can step back (failover to a replica, NTP): a state stamped
-- ahead of the clock counts as measured now, else the bucket would stay
-- frozen until the clock caught up; `skewed` says so, and a denial
-- re-stamps such a state, or it would never start accruing.
local function bucket(i, p)
  local k = keys[i]
  local b = buckets[k]
  if not b then
    local s = states[i]
    local stored, since, skewed, ver
    if s then
      stored, since, ver = state(s)
      if not stored then
        b = {foreign = since}
        buckets[k] = b
        return b
      elseif ver > p.ver then
        b = {stale = ver}
        buckets[k] = b
        return b
      end
      stored, since = refold(stored, since, p.max, p.rates)   -- see the top
      if not stored then
        b = {broken = true}
        buckets[k] = b
        return b
      end
      if since > now then
        since, skewed = now, true
      end
    end
    -- Every field is named here, so the table is made once at its size.
    b = {key = k, stored = stored, since = since, skewed = skewed or false,
         orig_stored = stored, orig_since = since, before = false, p = false,
         taken = false}
    buckets[k] = b
    written[#written + 1] = b
  end
  return b
end

local out = {}          -- per item: its answer (ANSWER)
local item_bucket = {}  -- per decided item: its bucket (whose .p is its policy)
local refused = false   -- some item of an "all" call was not granted

for i = 1, n do
  local p = policy(tonumber(ARGV[base + per * (i - 1)]))
  local want = tonumber(ARGV[base + per * (i - 1) + 1])
  local status = false
  if replayed[i] then
    -- an earlier take's answer (see the top): decided then, not now
    out[i] = replay(replayed[i])
  elseif want > p.max then
    status = -11
  end
  local b = not status and bucket(i, p)
  if b and b.foreign then
    status = -15
  elseif b and b.stale then
    status = STALE
  elseif b and b.broken then
    status, b = -13, false
  end
  if replayed[i] then
    rkeys[i] = false
  elseif status then
    out[i] = pack(ANSWER, status, 0, b and (b.foreign or b.stale) or 0, p.max, 0, 0, 0, 0, 0, 0, NOLEASE)
    rkeys[i] = false
    refused = true
  else
    local max, rate = p.max, p.rate
    local tokens = level(b.stored, b.since, max, rate, now)
    if not b.before then
      b.before, b.p = tokens, p   -- as it stood before this call took anything
    end
    item_bucket[i] = b
    local allowed, retry = 1, 0
    if mode ~= 'peek' and tokens >= want then
      tokens = tokens - want
      b.stored, b.since, b.taken = tokens, now, true
    elseif mode ~= 'peek' then
      -- Denied: nothing is taken.
      retry = retry_after(b.stored, b.since, max, rate, tokens, want)
      refused = true
      allowed = 0
    end
    out[i] = pack(ANSWER, 0, allowed, floor(tokens), max, retry, until_full(max, rate, tokens),
                  p.window, micro(tokens), 0, 0, NOLEASE)
  end
end

if mode == 'all' and refused then
  -- Nothing is granted. An item refused on its own (an error) aborts the
  -- others. Else the batch passes once every bucket holds what all of its
  -- items ask together: the wait is the longest of the buckets' waits for
  -- their totals (not of the items' own: the first of two takes would pass
  -- sooner than both), and a total beyond the bucket's max_permits can
  -- never pass: its items answer out_of_range, the others aborted.
  local total, errored, never, longest = {}, false, false, 0
  for i = 1, n do
    local b = item_bucket[i]
    if b then
      total[b] = (total[b] or 0) + tonumber(ARGV[base + per * (i - 1) + 1])
    elseif not replayed[i] then
      errored = true
    end
  end
  if not errored then
    for b, want in pairs(total) do
      local p = b.p
      if want > p.max then
        never = true
      elseif b.before < want then
        local wait = retry_after(b.orig_stored, b.orig_since, p.max, p.rate, b.before, want)
        if wait > longest then
          longest = wait
        end
      end
    end
  end
  for i = 1, n do
    local b = item_bucket[i]
    if b then
      local p = b.p
      if errored or (never and total[b] <= p.max) then
        out[i] = pack(ANSWER, -10, 0, 0, p.max, 0, 0, 0, 0, 0, 0, NOLEASE)
        rkeys[i] = false
      elseif never then
        out[i] = pack(ANSWER, -11, 0, total[b], p.max, 0, 0, 0, 0, 0, 0, NOLEASE)
        rkeys[i] = false
      else
        out[i] = pack(ANSWER, 0, 0, floor(b.before), p.max, longest,
                      until_full(p.max, p.rate, b.before), p.window, micro(b.before), 0, 0, NOLEASE)
      end
    end
  end
  for _, b in ipairs(written) do
    b.taken, b.stored, b.since = false, b.orig_stored, b.orig_since
  end
end

-- Each bucket is written once, with its final state, expiring when full; a
-- full bucket is no key. Every bucket written is stamped now (taken from,
-- or re-stamped: skewed), so its tokens need no refill (level()): a state
-- written under a larger max_permits reads as full and is deleted.
if mode ~= 'peek' then
  local created = {}
  for _, b in ipairs(written) do
    if b.taken or b.skewed then
      local p, tokens = b.p, b.stored
      local ttl = until_full(p.max, p.rate, tokens)
      if ttl > 0 then
        redis.call('SET', b.key, pack(STATE, tokens, now, p.ver), 'PX', ttl)
        if not b.orig_stored then
          created[#created + 1] = b.key     -- a new bucket (see the top)
        end
      elseif b.orig_stored then
        redis.call('DEL', b.key)
      end
    end
  end
  if #created > 0 then
    index_update(created)
  end
  -- Each allowed answer decided now is kept for its request id (see the top).
  for i = 1, any and n or 0 do
    if rkeys[i] and select(2, unpack_state('<dd', out[i])) == 1 then    -- allowed only
      redis.call('SET', rkeys[i], out[i], 'PX', ridttl)
    end
  end
end

-- hold (issue 38: a reservation's all-or-nothing take, lua/lib/hold.lua):
-- the answers, then the Redis time of the decision.
if ARGV[1] == 'hold' then
  return table.concat(out) .. pack('<d', now)
end
return table.concat(out)
