// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"fmt"
	"strconv"
	"strings"
)

// Budget is the most requests per hour a client may make: the client is
// named as in a Report (the user agent's program, with its suffix) or by
// its user; every client matching is summed.
type Budget struct {
	Client  string  `json:"client"`
	PerHour float64 `json:"perHour"`
}

// ParseBudget reads CLIENT=N/h (or N, or N/m and N/s, converted to an
// hour).
func ParseBudget(s string) (Budget, error) {
	client, rate, ok := strings.Cut(s, "=")
	if !ok || client == "" || rate == "" {
		return Budget{}, fmt.Errorf("budget %q: want CLIENT=N/h", s)
	}
	per := 1.0
	num := rate
	if n, unit, ok := strings.Cut(rate, "/"); ok {
		num = n
		switch unit {
		case "h":
		case "m":
			per = 60
		case "s":
			per = 3600
		default:
			return Budget{}, fmt.Errorf("budget %q: the unit is h, m or s, not %q", s, unit)
		}
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 {
		return Budget{}, fmt.Errorf("budget %q: %q is not a non-negative number", s, num)
	}
	return Budget{Client: client, PerHour: n * per}, nil
}

// BudgetResult is a budget and what its clients spent.
type BudgetResult struct {
	Budget
	// Spent is the matching clients' requests per hour; Clients how many
	// matched (none: the name is wrong, or the client made no request,
	// and the budget is not met, since nothing was checked).
	Spent   float64 `json:"spentPerHour"`
	Clients int     `json:"clients"`
	OK      bool    `json:"ok"`
}

// CheckBudgets measures each budget against rep.
func CheckBudgets(rep Report, budgets []Budget) []BudgetResult {
	out := make([]BudgetResult, 0, len(budgets))
	for _, b := range budgets {
		r := BudgetResult{Budget: b}
		for _, c := range rep.Clients {
			if c.Name == b.Client || c.User == b.Client {
				r.Clients++
				r.Spent += c.PerHour
			}
		}
		r.OK = r.Clients > 0 && r.Spent <= b.PerHour
		out = append(out, r)
	}
	return out
}
