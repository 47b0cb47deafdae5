package webfetch

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// Store keeps the entries humans approved; the operator's own list
// (Config.Seed) is never written to it. Implementations are safe for
// concurrent use. Domains reach it already canonical (see Canonical).
type Store interface {
	// AddDomain adds an allowlist entry; added is false if it was already listed.
	AddDomain(ctx context.Context, domain, addedBy string) (added bool, err error)
	// RemoveDomain removes an entry; removed is false if it was not listed.
	RemoveDomain(ctx context.Context, domain string) (removed bool, err error)
	// Domains returns every entry, sorted.
	Domains(ctx context.Context) ([]string, error)
	// Entries returns every entry with who added it, by domain.
	Entries(ctx context.Context) (map[string]string, error)
}

// MemStore is a Store in memory, for tests and for running without a
// database: its entries are lost when the process ends.
type MemStore struct {
	mu      sync.Mutex
	domains map[string]string // domain -> added by
}

var _ Store = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{domains: make(map[string]string)} }

// AddDomain implements Store.
func (m *MemStore) AddDomain(_ context.Context, domain, addedBy string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.domains[domain]; ok {
		return false, nil
	}
	m.domains[domain] = addedBy
	return true, nil
}

// RemoveDomain implements Store.
func (m *MemStore) RemoveDomain(_ context.Context, domain string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.domains[domain]; !ok {
		return false, nil
	}
	delete(m.domains, domain)
	return true, nil
}

// Domains implements Store.
func (m *MemStore) Domains(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.domains))
	for d := range m.domains {
		out = append(out, d)
	}
	slices.Sort(out)
	return out, nil
}

// Entries implements Store.
func (m *MemStore) Entries(context.Context) (map[string]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.domains), nil
}

// AddedBy reports who added domain, and whether it is listed.
func (m *MemStore) AddedBy(domain string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	by, ok := m.domains[domain]
	return by, ok
}
