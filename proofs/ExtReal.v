(** * Extended reals for the running maximum

    The running maximum of an empty prefix, or of a prefix whose scores are
    all masked, is −inf.  We model R ∪ {−inf} as [option R]: [None] is −inf,
    [Some x] is the real x.  Masked scores use the same encoding, so a
    masked position is simply a score equal to −inf. *)

Require Import Reals Lra.
Open Scope R_scope.

(** Maximum on R ∪ {−inf}; −inf is the identity. *)
Definition emax (x y : option R) : option R :=
  match x, y with
  | None, _ => y
  | _, None => x
  | Some p, Some q => Some (Rmax p q)
  end.

Lemma emax_None_l x : emax None x = x.
Proof. reflexivity. Qed.

Lemma emax_None_r x : emax x None = x.
Proof. destruct x; reflexivity. Qed.

Lemma emax_comm x y : emax x y = emax y x.
Proof. destruct x, y; simpl; try rewrite Rmax_comm; reflexivity. Qed.

Lemma emax_assoc x y z : emax x (emax y z) = emax (emax x y) z.
Proof. destruct x, y, z; simpl; try rewrite Rmax_assoc; reflexivity. Qed.

(** The maximum is −inf only if both arguments are. *)
Lemma emax_None_inv x y : emax x y = None -> x = None /\ y = None.
Proof. destruct x, y; simpl; intro H; try discriminate; auto. Qed.

(** The rescale factor exp(m_old − m_new).
    - exp(−inf − m) = 0 for a finite m.
    - −inf − (−inf) is undefined in floating point (NaN).  The model takes 1,
      the only choice that makes (−inf, 0, 0) an identity of [merge] on all
      states; on the states the algorithm actually reaches, m = −inf forces
      ℓ = a = 0, so any finite factor gives the same result.
    - m_new = −inf with m_old finite never happens (m_new ≥ m_old); 0 is a
      placeholder. *)
Definition scale (m_old m_new : option R) : R :=
  match m_old, m_new with
  | Some p, Some q => exp (p - q)
  | None, None => 1
  | None, Some _ => 0
  | Some _, None => 0
  end.

Lemma scale_refl x : scale x x = 1.
Proof. destruct x; simpl; [replace (r - r) with 0 by ring; apply exp_0 | reflexivity]. Qed.

(** Two rescalings compose into one: exp(x − y)·exp(y − z) = exp(x − z),
    provided the maxima only grow (−inf can only be followed by −inf from
    the right, and only preceded by −inf from the left). *)
Lemma scale_chain x y z :
  (y = None -> x = None) -> (z = None -> y = None) ->
  scale x y * scale y z = scale x z.
Proof.
  destruct x as [p|], y as [q|], z as [r|]; simpl; intros Hxy Hyz;
    try (specialize (Hxy eq_refl); discriminate);
    try (specialize (Hyz eq_refl); discriminate); try ring.
  rewrite <- exp_plus. f_equal. ring.
Qed.

(** Weight of a score s relative to a maximum M: exp(s − M).  A masked
    score (−inf) weighs 0.  M = −inf with s finite never happens (M is the
    maximum of the scores); 0 is a placeholder. *)
Definition weight (M s : option R) : R :=
  match s, M with
  | None, _ => 0
  | Some x, Some q => exp (x - q)
  | Some _, None => 0
  end.

Lemma weight_nonneg M s : 0 <= weight M s.
Proof. destruct s, M; simpl; try lra. left; apply exp_pos. Qed.

(** Changing the reference maximum from M' to M multiplies a weight by
    exp(M' − M).  This is the one identity the whole algorithm rests on:
    exp(s − M) = exp(M' − M) · exp(s − M'). *)
Lemma weight_rescale M' M s :
  (M' = None -> s = None) -> weight M s = scale M' M * weight M' s.
Proof.
  destruct s as [x|]; simpl; intro H; [|ring].
  destruct M' as [p|]; [|specialize (H eq_refl); discriminate].
  destruct M as [q|]; simpl; [|ring].
  rewrite <- exp_plus. f_equal. ring.
Qed.
