package vector

// mt19937 is the 32-bit Mersenne Twister (Matsumoto & Nishimura, 1998),
// std::mt19937, which FAISS's RandomGenerator wraps. k-means draws its
// subsample, its initial centroids and its empty-cluster splits from it
// exactly as FAISS does (faiss/utils/random.cpp, faiss/Clustering.cpp), so
// that with the same seed and data the two train the same centroids.
type mt19937 struct {
	s [624]uint32
	i int
}

func newMT19937(seed uint32) *mt19937 {
	m := &mt19937{i: 624}
	m.s[0] = seed
	for i := 1; i < 624; i++ {
		m.s[i] = 1812433253*(m.s[i-1]^(m.s[i-1]>>30)) + uint32(i)
	}
	return m
}

func (m *mt19937) next() uint32 {
	if m.i >= 624 {
		for k := range 624 {
			y := m.s[k]&0x80000000 | m.s[(k+1)%624]&0x7fffffff
			v := m.s[(k+397)%624] ^ y>>1
			if y&1 != 0 {
				v ^= 0x9908b0df
			}
			m.s[k] = v
		}
		m.i = 0
	}
	y := m.s[m.i]
	m.i++
	y ^= y >> 11
	y ^= y << 7 & 0x9d2c5680
	y ^= y << 15 & 0xefc60000
	y ^= y >> 18
	return y
}

// intN is FAISS's RandomGenerator::rand_int(max): next() mod max.
func (m *mt19937) intN(max int) int { return int(m.next() % uint32(max)) }

// float is FAISS's RandomGenerator::rand_float: next() / 2³²−1 in float32.
func (m *mt19937) float() float32 { return float32(m.next()) / float32(4294967295) }

// faissRandPerm is FAISS's rand_perm: a Fisher–Yates shuffle of 0…n−1
// drawn from mt19937(seed truncated to 32 bits).
func faissRandPerm(n int, seed int64) []int {
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	rng := newMT19937(uint32(seed))
	for i := 0; i+1 < n; i++ {
		j := i + rng.intN(n-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm
}
