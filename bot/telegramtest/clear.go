package telegramtest

import "strings"

// ClearFaults drops the faults still armed for method: the server answers
// its calls normally again.
func (s *Server) ClearFaults(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.faults, strings.ToLower(method))
}
