package config

import "strings"

// decimal is a number read exactly from its decimal text, for guards that
// compare numbers: min, max and numeric values. A float64 cannot tell
// 2^53 from 2^53+1, and a guard that compared in float64 let a number
// past its maximum through; comparing the decimal digits themselves
// cannot be fooled that way, and needs no arbitrary-precision arithmetic
// (whose cost a hostile 1e999999999 would choose).
//
// The value is 0.digits × 10^exp, with digits free of leading and
// trailing zeros; zero has no digits.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// maxExp saturates exponents: beyond it every number is as large (or as
// small) as any other for a guard's purpose, and the arithmetic below
// cannot overflow (the text a guard reads is at most a frame, 2^28 bytes,
// long, far below the headroom left).
const maxExp = 1 << 60

// parseDecimal reads a number in JSON's syntax, also accepting a '+'
// sign on the exponent and no integer digits before a '.', as Go's
// strconv.FormatFloat writes neither but other writers do. It reports
// false for anything else.
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	intStart := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart := s[intStart:i]
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		frac = s[fs:i]
		if frac == "" {
			return decimal{}, false
		}
	}
	if intPart == "" && frac == "" {
		return decimal{}, false
	}
	var e int64
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && isDigit(s[i]) {
			if e < maxExp {
				e = e*10 + int64(s[i]-'0')
			}
			i++
		}
		if i == es {
			return decimal{}, false
		}
		e = min(e, maxExp)
		if eneg {
			e = -e
		}
	}
	if i != len(s) {
		return decimal{}, false
	}
	// The point sits after intPart: leading zeros move it left, trailing
	// zeros of the whole do not move it.
	point := int64(len(intPart))
	all := intPart + frac
	lead := 0
	for lead < len(all) && all[lead] == '0' {
		lead++
	}
	all = strings.TrimRight(all[lead:], "0")
	if all == "" {
		return decimal{}, true // zero, whatever its sign or exponent
	}
	d.digits = all
	d.exp = point - int64(lead) + e
	return d, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// cmp returns -1, 0 or +1 as a is less than, equal to or greater than b.
func (a decimal) cmp(b decimal) int {
	switch {
	case a.digits == "" && b.digits == "":
		return 0
	case a.digits == "":
		return b.sign() * -1
	case b.digits == "":
		return a.sign()
	case a.neg != b.neg:
		return a.sign()
	}
	m := 0 // the magnitudes' order
	switch {
	case a.exp != b.exp:
		// The first digit is never 0, so the larger exponent is the
		// larger magnitude.
		m = 1
		if a.exp < b.exp {
			m = -1
		}
	default:
		// Same exponent: the digits compare as text, since neither has
		// trailing zeros (a proper prefix is the smaller number).
		m = strings.Compare(a.digits, b.digits)
	}
	if a.neg {
		return -m
	}
	return m
}

func (a decimal) sign() int {
	switch {
	case a.digits == "":
		return 0
	case a.neg:
		return -1
	}
	return 1
}
