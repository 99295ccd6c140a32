package redlock

import "time"

// RetryStrategy says how long Obtain waits before it tries again a key it
// was refused (WithRetryStrategy). Obtain stops trying when the strategy
// says so or when its context is done, whichever comes first.
//
// A strategy holds no state: the same one may serve any number of Obtain
// calls at once.
type RetryStrategy interface {
	// NextBackoff is the wait after the n-th refused attempt (n ≥ 1)
	// before the next one; 0 or less: no more attempts.
	NextBackoff(n int) time.Duration
}

// backoff is a RetryStrategy written as a function of n.
type backoff func(n int) time.Duration

func (b backoff) NextBackoff(n int) time.Duration { return b(n) }

// NoRetry makes one attempt. It is Obtain's default.
func NoRetry() RetryStrategy { return backoff(func(int) time.Duration { return 0 }) }

// LinearBackoff waits d after every refusal, trying until the context is
// done. d must be positive; 0 or less is NoRetry.
func LinearBackoff(d time.Duration) RetryStrategy {
	return backoff(func(int) time.Duration { return d })
}

// ExponentialBackoff waits lo after the first refusal and twice as long
// after each of the next ones, up to hi, trying until the context is done.
// lo must be positive (0 or less is NoRetry); a hi below lo is taken as lo.
func ExponentialBackoff(lo, hi time.Duration) RetryStrategy {
	hi = max(hi, lo)
	return backoff(func(n int) time.Duration {
		d := lo
		for i := 1; i < n; i++ {
			if d >= hi/2 {
				return hi
			}
			d *= 2
		}
		return d
	})
}

// LimitRetry is s with at most n retries (n+1 attempts in all).
func LimitRetry(s RetryStrategy, n int) RetryStrategy {
	return backoff(func(i int) time.Duration {
		if i > n {
			return 0
		}
		return s.NextBackoff(i)
	})
}
