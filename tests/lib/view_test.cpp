// Tests of ioattn::TensorView and ForwardArgs::validate.

#include "attention_case.hpp"

#include <ioattn/error.hpp>
#include <ioattn/view.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using ioattn::ForwardArgs;
using ioattn::InvalidArgument;
using ioattn::Problem;
using ioattn::TensorView;

TEST_CASE("TensorView::packed is row-major with heads inside batch", "[view]") {
    std::vector<float> buf(2 * 3 * 4 * 5);
    const auto v = TensorView<float>::packed(buf.data(), 2, 3, 4, 5);
    CHECK(v.stride_row == 5);
    CHECK(v.stride_head == 20);
    CHECK(v.stride_batch == 60);
    CHECK(v.extent == 120);
    CHECK(v.span() == 120);
    CHECK(v.row(1, 2, 3) == buf.data() + 60 + 40 + 15);
    const TensorView<const float> c = v;
    CHECK(c.data == buf.data());
    CHECK(c.span() == v.span());
    TensorView<float> empty = v;
    empty.rows = 0;
    CHECK(empty.span() == 0);
}

TEST_CASE("TensorView::span of a strided view", "[view]") {
    ioattn::test::Buffer<double> b(2, 3, 4, 5, ioattn::test::Padding{2, 3, 4}, 0.0);
    CHECK(b.view.stride_row == 7);
    CHECK(b.view.stride_head == 31);
    CHECK(b.view.stride_batch == 97);
    CHECK(b.view.span() == 97 + 2 * 31 + 3 * 7 + 5);
    CHECK(b.view.span() <= b.view.extent);
}

TEMPLATE_TEST_CASE("ForwardArgs::validate", "[view][throws]", float, double) {
    Problem p;
    p.batch = 2;
    p.heads = 2;
    p.kv_heads = 1;
    p.n_q = 5;
    p.n_k = 7;
    p.d = 3;
    p.d_v = 4;
    ioattn::test::AttentionCase<TestType> c(p, 1, ioattn::test::Padding{1, 2, 3});
    ForwardArgs<TestType> a = c.args();
    a.problem = p;
    CHECK_NOTHROW(a.validate("check"));
    CHECK(a.problem.kv_heads == 1); // resolved in place
    CHECK(a.problem.scale > 0.0);

    SECTION("shape_only allows null data, plain validation does not") {
        ForwardArgs<TestType> n = c.args();
        n.q.data = nullptr;
        n.k.data = nullptr;
        n.v.data = nullptr;
        n.o.data = nullptr;
        n.lse.data = nullptr;
        CHECK_NOTHROW(n.validate("dry", true));
        CHECK_THROWS_AS(n.validate("dry"), InvalidArgument);
    }
    SECTION("errors name the caller and the operand") {
        ForwardArgs<TestType> b = c.args();
        b.k.rows = 6;
        CHECK_THROWS_AS(b.validate("the_caller"), InvalidArgument);
        CHECK_THROWS_WITH(b.validate("the_caller"),
                          Catch::Contains("the_caller") && Catch::Contains("k"));
    }
    SECTION("extent one short") {
        ForwardArgs<TestType> b = c.args();
        b.k.extent = b.k.span() - 1;
        CHECK_THROWS_AS(b.validate("x"), InvalidArgument);
        b.k.extent = b.k.span();
        CHECK_NOTHROW(b.validate("x"));
    }
    SECTION("lse overlapping o") {
        ForwardArgs<TestType> b = c.args();
        b.lse.data = b.o.data + b.o.span() - 1;
        b.lse.extent = b.lse.span();
        CHECK_THROWS_AS(b.validate("x"), InvalidArgument);
    }
    SECTION("zero strides of inputs are allowed (broadcast), overlapping rows are not") {
        ForwardArgs<TestType> b = c.args();
        b.k.stride_batch = 0;
        CHECK_NOTHROW(b.validate("x"));
        b.k.stride_row = b.k.cols - 1;
        CHECK_THROWS_AS(b.validate("x"), InvalidArgument);
    }
}
