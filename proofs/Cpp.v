(** * The C++ guards for −inf agree with the model

    reference/online_softmax.h does not compute exp(−inf − (−inf)) (NaN):
    [absorb] returns early, leaving the state unchanged, when the new
    maximum is still −inf, and [merge] returns the identity when both
    maxima are −inf; the FA-1 [absorb] returns early like the FA-2 one.
    The model instead takes the factor 1 there
    ([ExtReal.scale]).  These lemmas show the two agree, so the theorems
    about the model are theorems about the C++ control flow. *)

Require Import Reals Lra List.
Require Import FlashCheck.ExtReal FlashCheck.OnlineSoftmax FlashCheck.Invariant FlashCheck.FA1.
Import ListNotations.
Open Scope R_scope.

(** C++ [absorb]: "if (m_new == -inf) return;" before any arithmetic. *)
Definition absorb_cpp (st : state) (t : list entry) : state :=
  match emax (m st) (tmax t) with
  | None => st
  | Some _ => absorb st t
  end.

(** C++ [merge]: "if (r.m == -inf) return r;" with r the identity. *)
Definition merge_cpp (x y : state) : state :=
  match emax (m x) (m y) with
  | None => init
  | Some _ => merge x y
  end.

(** [absorb_cpp_eq]: the early return changes nothing, on every state:
    with both maxima −inf the model multiplies by 1 and adds two empty sums. *)
Theorem absorb_cpp_eq st t : absorb_cpp st t = absorb st t.
Proof.
  unfold absorb_cpp.
  destruct (emax (m st) (tmax t)) as [M|] eqn:E; [reflexivity|].
  destruct (emax_None_inv _ _ E) as [Em Et].
  destruct (tmax_None_sums None t Et) as [Hw Hwv].
  destruct st as [mx lx ax]; cbn [m] in *; subst mx.
  unfold absorb; cbn [m l a]. rewrite E, Hw, Hwv. simpl. f_equal; ring.
Qed.

(** [merge_cpp_eq]: on reachable states (which are all the algorithm
    produces, [run_reachable]) returning the identity is what the model
    computes: both states are (−inf, 0, 0). *)
Theorem merge_cpp_eq x y : reachable x -> reachable y -> merge_cpp x y = merge x y.
Proof.
  intros [Hx _] [Hy _]. unfold merge_cpp.
  destruct (emax (m x) (m y)) as [M|] eqn:E; [reflexivity|].
  destruct (emax_None_inv _ _ E) as [Emx Emy].
  destruct (Hx Emx) as [Hlx Hax], (Hy Emy) as [Hly Hay].
  destruct x as [mx lx ax], y as [my ly ay]; cbn [m l a] in *; subst.
  unfold merge, init; cbn [m l a]. simpl. f_equal; ring.
Qed.

(** C++ FA-1 [absorb]: the same early return. *)
Definition fa1_absorb_cpp (st : fa1_state) (t : list entry) : fa1_state :=
  match emax (m1 st) (tmax t) with
  | None => st
  | Some _ => fa1_absorb st t
  end.

(** [fa1_absorb_cpp_eq]: on the FA-1 states the algorithm reaches (images
    of reachable FA-2 states, [fa1_equiv_fa2]) the early return is what the
    model computes: the state stays (−inf, 0, 0). *)
Theorem fa1_absorb_cpp_eq st t :
  reachable st -> fa1_absorb_cpp (to_fa1 st) t = fa1_absorb (to_fa1 st) t.
Proof.
  intros [H0 _]. unfold fa1_absorb_cpp.
  destruct (emax (m1 (to_fa1 st)) (tmax t)) as [M|] eqn:E; [reflexivity|].
  destruct (emax_None_inv _ _ E) as [Em Et].
  destruct (tmax_None_sums None t Et) as [Hw _].
  destruct st as [mx lx ax]; unfold to_fa1 in *; cbn [m l a m1 l1 o1] in *; subst mx.
  destruct (H0 eq_refl) as [-> ->].
  unfold fa1_absorb, finalize; cbn [m l a m1 l1 o1 fst]. rewrite E, Hw. simpl.
  f_equal. ring.
Qed.
