(** * Definitions: the online-softmax state and its operations

    One value coordinate.  Each key position carries a score s (an extended
    real, [None] = −inf = masked) and one coordinate v of its value row.
    Every operation below acts on the value coordinate linearly and the
    maximum m and the sum ℓ never look at v, so a value row of width d is d
    independent copies of this development sharing m and ℓ (see
    [Invariant.run_ml_values_independent]).  This mirrors the C++ code in
    reference/online_softmax.h, where [a] is a std::vector. *)

Require Import Reals Lra List.
Require Import FlashCheck.ExtReal.
Import ListNotations.
Open Scope R_scope.

(** One key position: (score, value coordinate). *)
Definition entry : Type := (option R * R)%type.

(** The FA-2 state (m, ℓ, a): running maximum, running sum of exp(s − m),
    running unnormalised output Σ exp(s − m)·v. *)
Record state := mkState { m : option R; l : R; a : R }.

(** The empty state (−inf, 0, 0). *)
Definition init : state := mkState None 0 0.

(** Maximum score of a tile (−inf for an empty tile). *)
Fixpoint tmax (t : list entry) : option R :=
  match t with
  | [] => None
  | (s, _) :: t' => emax s (tmax t')
  end.

(** Σ_j exp(s_j − M) and Σ_j exp(s_j − M)·v_j over a tile. *)
Fixpoint sum_w (M : option R) (t : list entry) : R :=
  match t with
  | [] => 0
  | (s, _) :: t' => weight M s + sum_w M t'
  end.

Fixpoint sum_wv (M : option R) (t : list entry) : R :=
  match t with
  | [] => 0
  | (s, v) :: t' => weight M s * v + sum_wv M t'
  end.

(** Absorb one score/value pair: the streaming step.
    m' = max(m, s);  ℓ' = ℓ·exp(m − m') + exp(s − m');
    a' = a·exp(m − m') + exp(s − m')·v. *)
Definition absorb1 (st : state) (e : entry) : state :=
  let (s, v) := e in
  let m' := emax (m st) s in
  mkState m' (l st * scale (m st) m' + weight m' s)
             (a st * scale (m st) m' + weight m' s * v).

(** Absorb a tile (FA-2 inner loop): one new maximum for the whole tile,
    one rescale of ℓ and a, then the tile's contributions. *)
Definition absorb (st : state) (t : list entry) : state :=
  let m' := emax (m st) (tmax t) in
  mkState m' (l st * scale (m st) m' + sum_w m' t)
             (a st * scale (m st) m' + sum_wv m' t).

(** Merge two partial states (split-KV / flash-decoding combine). *)
Definition merge (x y : state) : state :=
  let m' := emax (m x) (m y) in
  mkState m' (l x * scale (m x) m' + l y * scale (m y) m')
             (a x * scale (m x) m' + a y * scale (m y) m').

(** Output: O = a/ℓ and lse = m + ln ℓ; for m = −inf (empty or fully
    masked) the defined output is O = 0, lse = −inf ([None]). *)
Definition finalize (st : state) : R * option R :=
  match m st with
  | None => (0, None)
  | Some M => (a st / l st, Some (M + ln (l st)))
  end.

(** Fold one entry at a time, or one tile at a time, from the empty state. *)
Definition run (xs : list entry) : state := fold_left absorb1 xs init.
Definition run_tiles (ts : list (list entry)) : state := fold_left absorb ts init.

(** ** FA-1 variant: keeps the normalised output O instead of a.
    O' = (ℓ·exp(m − m')·O + Σ_j exp(s_j − m')·v_j) / ℓ'   (FA-1, Algorithm 1). *)
Record fa1_state := mkFa1 { m1 : option R; l1 : R; o1 : R }.

Definition fa1_init : fa1_state := mkFa1 None 0 0.

Definition fa1_absorb (st : fa1_state) (t : list entry) : fa1_state :=
  let m' := emax (m1 st) (tmax t) in
  let l' := l1 st * scale (m1 st) m' + sum_w m' t in
  mkFa1 m' l'
    (match m' with
     | None => 0   (* nothing unmasked seen yet: O stays 0 *)
     | Some _ => (l1 st * scale (m1 st) m' * o1 st + sum_wv m' t) / l'
     end).

Definition fa1_run (ts : list (list entry)) : fa1_state := fold_left fa1_absorb ts fa1_init.

(** ** The direct definition, on plain real scores s and values v
    softmax(s)·v = Σ_j exp(s_j − max s)·v_j / Σ_j exp(s_j − max s). *)
Fixpoint sum_exp (M : R) (s : list R) : R :=
  match s with
  | [] => 0
  | x :: s' => exp (x - M) + sum_exp M s'
  end.

Fixpoint dot_exp (M : R) (s v : list R) : R :=
  match s, v with
  | x :: s', y :: v' => exp (x - M) * y + dot_exp M s' v'
  | _, _ => 0
  end.

(** max s = fold_right Rmax s0 s' for s = s0 :: s'.  The empty list gets 0,
    the same defined output as a fully masked row. *)
Definition softmax_dot (s v : list R) : R :=
  match s with
  | [] => 0
  | s0 :: s' => let M := fold_right Rmax s0 s' in dot_exp M s v / sum_exp M s
  end.

(** log Σ_j exp(s_j), the direct log-sum-exp. *)
Definition logsumexp (s : list R) : R := ln (fold_right (fun x acc => exp x + acc) 0 s).

(** Pair plain scores with values: the unmasked input of the algorithm. *)
Definition entries (s v : list R) : list entry := combine (map Some s) v.

(** The positions that are not masked, with their real scores. *)
Fixpoint unmasked (xs : list entry) : list (R * R) :=
  match xs with
  | [] => []
  | (None, _) :: xs' => unmasked xs'
  | (Some x, v) :: xs' => (x, v) :: unmasked xs'
  end.
