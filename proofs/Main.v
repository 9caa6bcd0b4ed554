(** * The main theorem: what the CI check prints the assumptions of *)

Require Import Reals List.
Require Import FlashCheck.ExtReal FlashCheck.OnlineSoftmax FlashCheck.Invariant
               FlashCheck.Merge FlashCheck.Correctness FlashCheck.FA1.
Import ListNotations.
Open Scope R_scope.

(** [online_softmax_correct]: for any input (masked positions allowed) cut
    into any tiles, the FA-2 output, the FA-1 output, and the output of any
    merge tree over the same positions in any order, all equal softmax·v
    over the unmasked positions (0 if there are none). *)
Theorem online_softmax_correct (ts : list (list entry)) (tr : mtree) :
  Permutation.Permutation (leaves tr) (concat ts) ->
  let u := unmasked (concat ts) in
  fst (finalize (run_tiles ts)) = softmax_dot (map fst u) (map snd u) /\
  o1 (fa1_run ts) = softmax_dot (map fst u) (map snd u) /\
  fst (finalize (eval_tree tr)) = softmax_dot (map fst u) (map snd u).
Proof.
  intros P u. subst u.
  split; [|split].
  - rewrite tiling_independence. apply finalize_correct_masked.
  - apply fa1_correct.
  - rewrite merge_tree, (run_permutation _ _ P). apply finalize_correct_masked.
Qed.
