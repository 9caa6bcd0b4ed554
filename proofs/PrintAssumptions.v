(** Not part of the development (not in _CoqProject): check_proofs.sh
    compiles this file last and reads its output.  Two blocks, each headed
    by a "### name" line so the script can tell them apart:
    - the main theorem, printed in the test log;
    - a tuple of every theorem docs/proof.md cites, so that one traversal
      covers them all (one Print Assumptions per theorem costs ~0.5 s each).
    The script fails if either block names an assumption outside the Reals
    library's own axioms. *)
Require Import FlashCheck.Main FlashCheck.Invariant FlashCheck.Merge
               FlashCheck.Correctness FlashCheck.FA1 FlashCheck.Cpp.

Goal True. idtac "### online_softmax_correct". Abort.
Print Assumptions online_softmax_correct.

Definition all_cited_theorems :=
  ( @online_softmax_correct,
    @prefix_invariant,
    @prefix_invariant_fields,
    @tiling_independence,
    @tiling_independence_any,
    @run_ml_values_independent,
    @merge_comm,
    @merge_assoc,
    @merge_id_l,
    @merge_id_r,
    @merge_split,
    @absorb_is_merge,
    @merge_tree,
    @run_permutation,
    @merge_any_order,
    @finalize_correct,
    @finalize_lse_correct,
    @finalize_correct_masked,
    @absorb_masked_noop,
    @masked_contributes_nothing,
    @fully_masked_output,
    @fa1_equiv_fa2,
    @fa1_output_eq_fa2,
    @fa1_correct,
    @run_reachable,
    @absorb_cpp_eq,
    @merge_cpp_eq,
    @fa1_absorb_cpp_eq ).

Goal True. idtac "### all_cited_theorems". Abort.
Print Assumptions all_cited_theorems.
