(** * Correctness of finalize, and masking *)

Require Import Reals Lra Lia List.
Require Import FlashCheck.ExtReal FlashCheck.OnlineSoftmax FlashCheck.Invariant FlashCheck.Merge.
Import ListNotations.
Open Scope R_scope.

(** ** Linking the algorithm's sums to the direct definition *)

Lemma tmax_entries s0 s v :
  length s = length v ->
  emax (Some s0) (tmax (entries s v)) = Some (fold_right Rmax s0 s).
Proof.
  revert v. induction s as [|x s IH]; intros [|y v] H; simpl in H;
    try discriminate; [reflexivity|].
  injection H as H.
  change (tmax (entries (x :: s) (y :: v))) with (emax (Some x) (tmax (entries s v))).
  cbn [fold_right].
  rewrite emax_assoc, (emax_comm (Some s0) (Some x)), <- emax_assoc, (IH v H).
  reflexivity.
Qed.

Lemma sum_w_entries M s v :
  length s = length v -> sum_w (Some M) (entries s v) = sum_exp M s.
Proof.
  revert v. induction s as [|x s IH]; intros [|y v] H; simpl in *;
    try discriminate; [reflexivity|].
  injection H as H. unfold entries in IH. rewrite (IH v H). reflexivity.
Qed.

Lemma sum_wv_entries M s v : sum_wv (Some M) (entries s v) = dot_exp M s v.
Proof.
  revert v. induction s as [|x s IH]; intros [|y v]; simpl; try reflexivity.
  unfold entries in IH. rewrite (IH v). reflexivity.
Qed.

(** ** Correctness on unmasked input *)

(** finalize of the specified state, unfolded. *)
Lemma finalize_spec xs :
  finalize (spec xs) =
  match tmax xs with
  | None => (0, None)
  | Some M => (sum_wv (Some M) xs / sum_w (Some M) xs, Some (M + ln (sum_w (Some M) xs)))
  end.
Proof. unfold finalize, spec; cbn [m l a]. destruct (tmax xs); reflexivity. Qed.

Lemma tmax_entries_cons s0 s v0 v :
  length s = length v ->
  tmax (entries (s0 :: s) (v0 :: v)) = Some (fold_right Rmax s0 s).
Proof.
  intro H.
  change (tmax (entries (s0 :: s) (v0 :: v))) with (emax (Some s0) (tmax (entries s v))).
  apply tmax_entries, H.
Qed.

(** [finalize_correct]: for every non-empty list of scores s with values v
    of the same length, the output O of the online algorithm is
    softmax(s)·v = Σ exp(s_j − max s)·v_j / Σ exp(s_j − max s). *)
Theorem finalize_correct s v :
  s <> [] -> length s = length v ->
  fst (finalize (run (entries s v))) = softmax_dot s v.
Proof.
  intros Hne Hlen.
  destruct s as [|s0 s']; [contradiction|]. destruct v as [|v0 v']; [discriminate|].
  rewrite prefix_invariant, finalize_spec.
  rewrite tmax_entries_cons by (simpl in Hlen; lia). cbn [fst].
  rewrite sum_w_entries, sum_wv_entries by exact Hlen.
  reflexivity.
Qed.

Lemma sum_exp_nonneg M s : 0 <= sum_exp M s.
Proof. induction s as [|x s IH]; simpl; [lra|]. pose proof (exp_pos (x - M)). lra. Qed.

Lemma sum_exp_pos M s : s <> [] -> 0 < sum_exp M s.
Proof.
  destruct s as [|x s]; [contradiction|]. intros _. simpl.
  pose proof (exp_pos (x - M)). pose proof (sum_exp_nonneg M s). lra.
Qed.

(** exp(M)·Σ exp(s_j − M) = Σ exp(s_j). *)
Lemma sum_exp_shift M s :
  exp M * sum_exp M s = fold_right (fun x acc => exp x + acc) 0 s.
Proof.
  induction s as [|x s IH]; simpl; [ring|].
  rewrite <- IH, Rmult_plus_distr_l, <- exp_plus.
  replace (M + (x - M)) with x by ring. reflexivity.
Qed.

(** [finalize_lse_correct]: for every non-empty unmasked list, the lse the
    algorithm returns, m + ln ℓ, equals log Σ_j exp(s_j). *)
Theorem finalize_lse_correct s v :
  s <> [] -> length s = length v ->
  snd (finalize (run (entries s v))) = Some (logsumexp s).
Proof.
  intros Hne Hlen.
  destruct s as [|s0 s']; [contradiction|]. destruct v as [|v0 v']; [discriminate|].
  rewrite prefix_invariant, finalize_spec.
  rewrite tmax_entries_cons by (simpl in Hlen; lia). cbn [snd].
  rewrite sum_w_entries by exact Hlen.
  set (M := fold_right Rmax s0 s').
  unfold logsumexp. rewrite <- (sum_exp_shift M).
  rewrite ln_mult, ln_exp; [reflexivity | apply exp_pos | apply sum_exp_pos; discriminate].
Qed.

(** ** Masking *)

(** [absorb_masked_noop]: absorbing a masked position (score −inf) leaves
    any state unchanged. *)
Theorem absorb_masked_noop st v : absorb1 st (None, v) = st.
Proof.
  destruct st as [mx lx ax]; unfold absorb1; simpl.
  rewrite emax_None_r, scale_refl. f_equal; ring.
Qed.

(** [masked_contributes_nothing]: inserting a masked position anywhere in
    the input does not change the state. *)
Theorem masked_contributes_nothing xs ys v :
  run (xs ++ (None, v) :: ys) = run (xs ++ ys).
Proof.
  rewrite !prefix_invariant. unfold spec.
  rewrite !tmax_app, !sum_w_app, !sum_wv_app. simpl.
  f_equal; ring.
Qed.

Lemma tmax_all_masked xs : (forall e, In e xs -> fst e = None) -> tmax xs = None.
Proof.
  induction xs as [|[s v] xs IH]; intro H; [reflexivity|].
  assert (Hs : s = None) by exact (H (s, v) (or_introl eq_refl)).
  cbn [tmax]. rewrite Hs, IH by (intros e He; apply H; right; exact He).
  reflexivity.
Qed.

(** [fully_masked_output]: a list in which every score is −inf (including
    the empty list) finalizes to the defined output O = 0, lse = −inf. *)
Theorem fully_masked_output xs :
  (forall e, In e xs -> fst e = None) -> finalize (run xs) = (0, None).
Proof.
  intro H. rewrite prefix_invariant. unfold finalize, spec; simpl.
  rewrite (tmax_all_masked xs H). reflexivity.
Qed.

Lemma spec_cons_congr e xs ys : spec xs = spec ys -> spec (e :: xs) = spec (e :: ys).
Proof.
  intro H. change (e :: xs) with ([e] ++ xs). change (e :: ys) with ([e] ++ ys).
  rewrite <- !merge_spec, H. reflexivity.
Qed.

Lemma spec_masked_cons v xs : spec ((None, v) :: xs) = spec xs.
Proof. unfold spec; simpl. f_equal; ring. Qed.

(** Dropping the masked positions does not change the state. *)
Lemma spec_unmasked xs :
  spec xs = spec (entries (map fst (unmasked xs)) (map snd (unmasked xs))).
Proof.
  induction xs as [|[[x|] v] xs IH]; [reflexivity| |].
  - cbn [unmasked map].
    change (entries (x :: map fst (unmasked xs)) (v :: map snd (unmasked xs)))
      with ((Some x, v) :: entries (map fst (unmasked xs)) (map snd (unmasked xs))).
    apply spec_cons_congr, IH.
  - cbn [unmasked]. rewrite spec_masked_cons. exact IH.
Qed.

(** [finalize_correct_masked]: on any input, masked or not, the output O is
    softmax·v over the unmasked positions, and 0 when there are none. *)
Theorem finalize_correct_masked xs :
  fst (finalize (run xs)) = softmax_dot (map fst (unmasked xs)) (map snd (unmasked xs)).
Proof.
  rewrite prefix_invariant, spec_unmasked, <- prefix_invariant.
  destruct (unmasked xs) as [|p u]; [reflexivity|].
  apply finalize_correct; [discriminate | rewrite !map_length; reflexivity].
Qed.
