(** * FA-1 (normalised O) and FA-2 (unnormalised a) compute the same output *)

Require Import Reals Lra List.
Require Import FlashCheck.ExtReal FlashCheck.OnlineSoftmax FlashCheck.Invariant
               FlashCheck.Correctness.
Import ListNotations.
Open Scope R_scope.

(** The FA-1 state that corresponds to an FA-2 state: same m and ℓ, and
    the normalised output O = a/ℓ (0 while nothing unmasked was seen). *)
Definition to_fa1 (st : state) : fa1_state := mkFa1 (m st) (l st) (fst (finalize st)).

(** One FA-1 tile step on the image of a reachable state is the image of
    one FA-2 tile step: ℓ·exp(m − m')·(a/ℓ) = a·exp(m − m'). *)
Lemma fa1_absorb_commutes st t :
  reachable st -> fa1_absorb (to_fa1 st) t = to_fa1 (absorb st t).
Proof.
  destruct st as [mx lx ax]; unfold reachable; cbn [m l a]; intros [H0 H1].
  unfold fa1_absorb, to_fa1, absorb, finalize; cbn [m l a m1 l1 o1].
  f_equal.
  destruct mx as [M|].
  - assert (Hl : lx <> 0) by (apply H1; discriminate).
    destruct (emax (Some M) (tmax t)); cbn [fst]; [|reflexivity].
    f_equal. field. exact Hl.
  - destruct (H0 eq_refl) as [-> ->].
    destruct (emax None (tmax t)); cbn [fst]; [|reflexivity].
    f_equal. ring.
Qed.

Lemma fold_fa1_spec ts xs :
  fold_left fa1_absorb ts (to_fa1 (spec xs)) = to_fa1 (spec (xs ++ concat ts)).
Proof.
  revert xs. induction ts as [|t ts IH]; intro xs; simpl.
  - rewrite app_nil_r. reflexivity.
  - rewrite fa1_absorb_commutes by apply spec_reachable.
    rewrite absorb_spec, IH, app_assoc. reflexivity.
Qed.

(** [fa1_equiv_fa2]: over any tiling, the FA-1 state is the FA-2 state with
    a replaced by the normalised O = a/ℓ. *)
Theorem fa1_equiv_fa2 ts : fa1_run ts = to_fa1 (run_tiles ts).
Proof.
  unfold fa1_run. change fa1_init with (to_fa1 (spec [])).
  rewrite fold_fa1_spec, tiling_independence, prefix_invariant. reflexivity.
Qed.

(** [fa1_output_eq_fa2]: the two forms yield the same output O. *)
Corollary fa1_output_eq_fa2 ts : o1 (fa1_run ts) = fst (finalize (run_tiles ts)).
Proof. rewrite fa1_equiv_fa2. reflexivity. Qed.

(** [fa1_correct]: FA-1's output is softmax·v over the unmasked positions. *)
Corollary fa1_correct ts :
  o1 (fa1_run ts) =
  softmax_dot (map fst (unmasked (concat ts))) (map snd (unmasked (concat ts))).
Proof.
  rewrite fa1_output_eq_fa2, tiling_independence. apply finalize_correct_masked.
Qed.
