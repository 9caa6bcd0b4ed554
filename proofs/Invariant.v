(** * The prefix invariant and tiling independence *)

Require Import Reals Lra List.
Require Import FlashCheck.ExtReal FlashCheck.OnlineSoftmax.
Import ListNotations.
Open Scope R_scope.

(** The state the algorithm should hold after reading xs: the maximum of
    xs, and the two sums taken relative to that maximum. *)
Definition spec (xs : list entry) : state :=
  mkState (tmax xs) (sum_w (tmax xs) xs) (sum_wv (tmax xs) xs).

Lemma spec_nil : spec [] = init.
Proof. reflexivity. Qed.

Lemma tmax_app xs ys : tmax (xs ++ ys) = emax (tmax xs) (tmax ys).
Proof.
  induction xs as [|[s v] xs IH]; simpl; [reflexivity|].
  rewrite IH. apply emax_assoc.
Qed.

Lemma sum_w_app M xs ys : sum_w M (xs ++ ys) = sum_w M xs + sum_w M ys.
Proof. induction xs as [|[s v] xs IH]; simpl; [ring|]. rewrite IH. ring. Qed.

Lemma sum_wv_app M xs ys : sum_wv M (xs ++ ys) = sum_wv M xs + sum_wv M ys.
Proof. induction xs as [|[s v] xs IH]; simpl; [ring|]. rewrite IH. ring. Qed.

Lemma sum_w_nonneg M xs : 0 <= sum_w M xs.
Proof.
  induction xs as [|[s v] xs IH]; simpl; [lra|].
  pose proof (weight_nonneg M s). lra.
Qed.

(** A list whose maximum is −inf is fully masked, so both sums vanish. *)
Lemma tmax_None_sums M xs :
  tmax xs = None -> sum_w M xs = 0 /\ sum_wv M xs = 0.
Proof.
  induction xs as [|[s v] xs IH]; simpl; intro H; [lra|].
  apply emax_None_inv in H as [-> Ht].
  destruct (IH Ht) as [-> ->]. simpl. split; ring.
Qed.

(** If the maximum is finite, the sum of weights is positive: the maximal
    score weighs exp 0 = 1 and no weight is negative. *)
Lemma sum_w_pos M xs : tmax xs = Some M -> 0 < sum_w (Some M) xs.
Proof.
  induction xs as [|[s v] xs IH]; simpl; intro H; [discriminate|].
  destruct s as [x|]; simpl in *.
  - pose proof (exp_pos (x - M)). pose proof (sum_w_nonneg (Some M) xs). lra.
  - specialize (IH H). lra.
Qed.

(** The rescale equivalence on sums: moving the reference maximum from M'
    to M multiplies Σ exp(s_j − M') and Σ exp(s_j − M')·v_j by
    exp(M' − M).  M' may be −inf only when the list is fully masked. *)
Lemma sums_rescale M' M xs :
  (M' = None -> tmax xs = None) ->
  sum_w M xs = scale M' M * sum_w M' xs /\ sum_wv M xs = scale M' M * sum_wv M' xs.
Proof.
  induction xs as [|[s v] xs IH]; simpl; intro H; [split; ring|].
  assert (Hs : M' = None -> s = None) by (intro E; apply (emax_None_inv _ _ (H E))).
  assert (Ht : M' = None -> tmax xs = None) by (intro E; apply (emax_None_inv _ _ (H E))).
  destruct (IH Ht) as [-> ->].
  rewrite (weight_rescale M' M s Hs). split; ring.
Qed.

(** Absorbing a tile into the state of xs gives the state of xs ++ t.
    This is where rescaling by exp(m_old − m_new) is shown to be exact. *)
Lemma absorb_spec xs t : absorb (spec xs) t = spec (xs ++ t).
Proof.
  unfold absorb, spec; simpl.
  rewrite tmax_app, !sum_w_app, !sum_wv_app.
  destruct (sums_rescale (tmax xs) (emax (tmax xs) (tmax t)) xs) as [-> ->]; [auto|].
  f_equal; ring.
Qed.

(** Absorbing one entry is absorbing the one-entry tile. *)
Lemma absorb1_is_absorb st e : absorb1 st e = absorb st [e].
Proof.
  destruct e as [s v]. unfold absorb1, absorb; simpl.
  rewrite emax_None_r. f_equal; ring.
Qed.

Lemma absorb1_spec xs e : absorb1 (spec xs) e = spec (xs ++ [e]).
Proof. rewrite absorb1_is_absorb. apply absorb_spec. Qed.

Lemma fold_absorb1_spec ys xs : fold_left absorb1 ys (spec xs) = spec (xs ++ ys).
Proof.
  revert xs. induction ys as [|e ys IH]; intro xs; simpl.
  - rewrite app_nil_r. reflexivity.
  - rewrite absorb1_spec, IH, <- app_assoc. reflexivity.
Qed.

(** [prefix_invariant]: after streaming any list xs one entry at a time,
    m is the maximum of xs, ℓ = Σ exp(s_j − m) and a = Σ exp(s_j − m)·v_j. *)
Theorem prefix_invariant xs : run xs = spec xs.
Proof. unfold run. rewrite <- spec_nil. apply fold_absorb1_spec. Qed.

(** The same statement, spelled out field by field. *)
Corollary prefix_invariant_fields xs :
  m (run xs) = tmax xs /\
  l (run xs) = sum_w (m (run xs)) xs /\
  a (run xs) = sum_wv (m (run xs)) xs.
Proof. rewrite prefix_invariant. unfold spec; simpl. auto. Qed.

Lemma fold_absorb_spec ts xs : fold_left absorb ts (spec xs) = spec (xs ++ concat ts).
Proof.
  revert xs. induction ts as [|t ts IH]; intro xs; simpl.
  - rewrite app_nil_r. reflexivity.
  - rewrite absorb_spec, IH, app_assoc. reflexivity.
Qed.

(** [tiling_independence]: folding [absorb] over consecutive tiles gives
    the state of streaming their concatenation one entry at a time. *)
Theorem tiling_independence ts : run_tiles ts = run (concat ts).
Proof.
  unfold run_tiles. rewrite <- spec_nil, fold_absorb_spec, prefix_invariant.
  reflexivity.
Qed.

(** [tiling_independence_any]: any two tilings of the same list give the
    same state. *)
Corollary tiling_independence_any ts1 ts2 :
  concat ts1 = concat ts2 -> run_tiles ts1 = run_tiles ts2.
Proof. intro H. rewrite !tiling_independence, H. reflexivity. Qed.

(** The states the algorithm reaches: m = −inf forces ℓ = a = 0, and a
    finite m forces ℓ ≠ 0.  FA-1 ≡ FA-2 needs this (FA-1 divides by ℓ), and
    so does matching the C++ guards for −inf (Cpp.v). *)
Definition reachable (st : state) : Prop :=
  (m st = None -> l st = 0 /\ a st = 0) /\ (m st <> None -> l st <> 0).

Lemma spec_reachable xs : reachable (spec xs).
Proof.
  unfold reachable, spec; cbn [m l a]. split.
  - apply tmax_None_sums.
  - intro H. destruct (tmax xs) as [M|] eqn:E; [|contradiction].
    pose proof (sum_w_pos M xs E). lra.
Qed.

(** [run_reachable]: every state the algorithm produces is reachable. *)
Corollary run_reachable xs : reachable (run xs).
Proof. rewrite prefix_invariant. apply spec_reachable. Qed.

(** [run_ml_values_independent]: m and ℓ do not depend on the values.
    Two lists with the same scores give the same m and ℓ, which is why one
    value coordinate suffices: a value row of width d runs d copies of the
    a-recurrence over one shared (m, ℓ). *)
Lemma tmax_scores xs ys : map fst xs = map fst ys -> tmax xs = tmax ys.
Proof.
  revert ys. induction xs as [|[s v] xs IH]; intros [|[s' v'] ys] H;
    simpl in *; try discriminate; [reflexivity|].
  injection H as -> H. rewrite (IH ys H). reflexivity.
Qed.

Lemma sum_w_scores M xs ys : map fst xs = map fst ys -> sum_w M xs = sum_w M ys.
Proof.
  revert ys. induction xs as [|[s v] xs IH]; intros [|[s' v'] ys] H;
    simpl in *; try discriminate; [reflexivity|].
  injection H as -> H. rewrite (IH ys H). reflexivity.
Qed.

Theorem run_ml_values_independent xs ys :
  map fst xs = map fst ys -> m (run xs) = m (run ys) /\ l (run xs) = l (run ys).
Proof.
  intro H. rewrite !prefix_invariant. unfold spec; simpl.
  rewrite (tmax_scores xs ys H), (sum_w_scores _ xs ys H). auto.
Qed.
