#pragma once
/// The linear maps of matrix entry compression (Saha & Ye Def 4.2) restricted to an index set:
/// with K fixed, Q -> (Q K^T)|_I; with Q fixed, K -> (Q K^T)|_I. Their ranks are the number of
/// field elements any protocol for I must send (docs/design.md section 10.2).

#include <ioattn/ff/field.hpp>
#include <ioattn/ff/index_set.hpp>
#include <ioattn/ff/matrix.hpp>

#include <cstdint>
#include <vector>

namespace ioattn::ff {

/// The |I| x (n_q d) matrix of Q -> (Q K^T)|_I on vec(Q) (row-major): the row of entry (i, j)
/// holds K_j in the block of Q_i. K is n_k x d with n_k = set.n_cols(), n_q = set.n_rows().
Matrix query_map(const IndexSet& set, const Matrix& k, const Prime& p);

/// The |I| x (n_k d) matrix of K -> (Q K^T)|_I on vec(K): the row of (i, j) holds Q_i in the
/// block of K_j. Q is n_q x d.
Matrix key_map(const IndexSet& set, const Matrix& q, const Prime& p);

/// rank(query_map) through its block structure: sum over rows i of rank(K restricted to R_i).
std::int64_t query_map_rank_blocks(const IndexSet& set, const Matrix& k, const Prime& p);

/// rank(key_map) through its block structure: sum over columns j of rank(Q restricted to C_j).
std::int64_t key_map_rank_blocks(const IndexSet& set, const Matrix& q, const Prime& p);

/// (Q K^T)|_I in the order of set.entries(), computed naively.
std::vector<std::int64_t>
restricted_product(const Matrix& q, const Matrix& k, const IndexSet& set, const Prime& p);

} // namespace ioattn::ff
