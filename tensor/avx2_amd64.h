// Macros shared by the AVX2 assembly of this package.

// HSUM reduces the 8 lanes of Y into the low lane of X (the low half of Y),
// using T as scratch: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). Every AVX2
// dot-product kernel folds its 8-lane accumulators with it, so that they
// return bit-identical sums for the same pair.
#define HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS       T, X, X; \
	VMOVHLPS     X, T, T; \
	VADDPS       T, X, X; \
	VMOVSHDUP    X, T; \
	VADDSS       T, X, X
