(** * Merge: a commutative monoid, and any merge order gives the same state *)

Require Import Reals Lra List Permutation.
Require Import FlashCheck.ExtReal FlashCheck.OnlineSoftmax FlashCheck.Invariant.
Import ListNotations.
Open Scope R_scope.

(** [merge_comm]: merge(x, y) = merge(y, x), for every pair of states. *)
Theorem merge_comm x y : merge x y = merge y x.
Proof.
  destruct x as [mx lx ax], y as [my ly ay]; unfold merge; simpl.
  rewrite (emax_comm my mx). f_equal; ring.
Qed.

(** [merge_id_l], [merge_id_r]: (−inf, 0, 0) is an identity, for every state. *)
Theorem merge_id_l x : merge init x = x.
Proof.
  destruct x as [mx lx ax]; unfold merge, init; simpl.
  rewrite scale_refl. f_equal; ring.
Qed.

Theorem merge_id_r x : merge x init = x.
Proof. rewrite merge_comm. apply merge_id_l. Qed.

(** [merge_assoc]: merge(x, merge(y, z)) = merge(merge(x, y), z), for every
    triple of states.  Each side rescales every ℓ and a to the overall
    maximum M, once directly or twice through an intermediate maximum;
    [scale_chain] says the two routes agree. *)
Theorem merge_assoc x y z : merge x (merge y z) = merge (merge x y) z.
Proof.
  destruct x as [mx lx ax], y as [my ly ay], z as [mz lz az]; unfold merge; simpl.
  rewrite <- (emax_assoc mx my mz).
  set (M := emax mx (emax my mz)).
  assert (HM : M = None -> emax my mz = None /\ emax mx my = None).
  { unfold M. intro E. destruct (emax_None_inv _ _ E) as [E1 E2].
    destruct (emax_None_inv _ _ E2) as [E3 E4]. subst. auto. }
  assert (H1 : scale my (emax my mz) * scale (emax my mz) M = scale my M).
  { apply scale_chain; [intro E; apply (emax_None_inv _ _ E) | apply HM]. }
  assert (H2 : scale mz (emax my mz) * scale (emax my mz) M = scale mz M).
  { apply scale_chain; [intro E; apply (emax_None_inv _ _ E) | apply HM]. }
  assert (H3 : scale mx (emax mx my) * scale (emax mx my) M = scale mx M).
  { apply scale_chain; [intro E; apply (emax_None_inv _ _ E) | apply HM]. }
  assert (H4 : scale my (emax mx my) * scale (emax mx my) M = scale my M).
  { apply scale_chain; [intro E; apply (emax_None_inv _ _ E) | apply HM]. }
  f_equal.
  - transitivity (lx * scale mx M + ly * scale my M + lz * scale mz M).
    + rewrite <- H1, <- H2. ring.
    + rewrite <- H3, <- H4. ring.
  - transitivity (ax * scale mx M + ay * scale my M + az * scale mz M).
    + rewrite <- H1, <- H2. ring.
    + rewrite <- H3, <- H4. ring.
Qed.

(** Merging the states of two lists gives the state of their concatenation. *)
Lemma merge_spec xs ys : merge (spec xs) (spec ys) = spec (xs ++ ys).
Proof.
  unfold merge, spec; simpl.
  rewrite tmax_app, !sum_w_app, !sum_wv_app.
  set (M := emax (tmax xs) (tmax ys)).
  destruct (sums_rescale (tmax xs) M xs) as [-> ->]; [auto|].
  destruct (sums_rescale (tmax ys) M ys) as [-> ->]; [auto|].
  f_equal; ring.
Qed.

(** [merge_split]: for any split of a list into xs ++ ys, merging the two
    halves' states equals the state of the whole list. *)
Theorem merge_split xs ys : merge (run xs) (run ys) = run (xs ++ ys).
Proof. rewrite !prefix_invariant. apply merge_spec. Qed.

(** Absorbing a tile is merging with that tile's own state. *)
Theorem absorb_is_merge st t : absorb st t = merge st (run t).
Proof.
  rewrite prefix_invariant.
  destruct st as [mx lx ax]; unfold absorb, merge, spec; simpl.
  destruct (sums_rescale (tmax t) (emax mx (tmax t)) t) as [-> ->]; [auto|].
  f_equal; ring.
Qed.

(** A merge tree: leaves are tiles absorbed from the empty state, inner
    nodes merge their children.  Any shape = any parenthesisation. *)
Inductive mtree : Type :=
  | Leaf (t : list entry)
  | Node (left right : mtree).

Fixpoint eval_tree (tr : mtree) : state :=
  match tr with
  | Leaf t => absorb init t
  | Node x y => merge (eval_tree x) (eval_tree y)
  end.

Fixpoint leaves (tr : mtree) : list entry :=
  match tr with
  | Leaf t => t
  | Node x y => leaves x ++ leaves y
  end.

(** [merge_tree]: any merge tree gives the state of its leaves read left
    to right. *)
Theorem merge_tree tr : eval_tree tr = run (leaves tr).
Proof.
  induction tr as [t | x IHx y IHy]; simpl.
  - rewrite <- spec_nil, absorb_spec, prefix_invariant. reflexivity.
  - rewrite IHx, IHy. apply merge_split.
Qed.

(** [run_permutation]: the state does not depend on the order of the key
    positions at all (softmax·v is a sum). *)
Theorem run_permutation xs ys : Permutation xs ys -> run xs = run ys.
Proof.
  intro P. rewrite !prefix_invariant.
  assert (Hc : forall e zs, spec (e :: zs) = merge (spec [e]) (spec zs))
    by (intros; rewrite merge_spec; reflexivity).
  induction P as [| e xs ys P IH | e f zs | xs ys zs P1 IH1 P2 IH2].
  - reflexivity.
  - rewrite (Hc e xs), (Hc e ys), IH. reflexivity.
  - rewrite (Hc f (e :: zs)), (Hc e (f :: zs)), (Hc e zs), (Hc f zs).
    rewrite !merge_assoc, (merge_comm (spec [f])). reflexivity.
  - rewrite IH1. exact IH2.
Qed.

(** [merge_any_order]: two merge trees over the same key positions, in any
    shape and any order, give the same state. *)
Corollary merge_any_order t1 t2 :
  Permutation (leaves t1) (leaves t2) -> eval_tree t1 = eval_tree t2.
Proof. intro P. rewrite !merge_tree. apply run_permutation, P. Qed.
