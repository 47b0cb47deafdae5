package shell

import (
	"strings"
	"testing"
	"time"
)

func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		`pwd && rm -rf /`, `$(curl x)`, `a|b`, `echo hi > f`, `echo "a && b"`, "cat <<EOF\n$(rm y)\nEOF",
		`bash -c "rm x"`, `env X=1 rm x`, `xargs rm`, "git \\\n status", "ls # c", `${x}rm`,
		`sudo -u bob nice -n 1 timeout 5 xargs -I{} sh -c 'eval "rm {}"'`, `find . -exec sh -c 'rm x' \;`,
		`f() { (x=$(a <(b) | c) ; [[ $(d) ]]) & }; trap 'e' EXIT`, `for i in {1..3}; do $i; done`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		done := make(chan struct{})
		var ex Extraction
		var err error
		go func() {
			defer close(done)
			ex, err = Extract(s)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("Extract(%q) did not return", s)
		}
		if err != nil {
			return
		}
		for _, c := range ex.Commands {
			if c.Text == "" || c.Name == "" {
				t.Fatalf("Extract(%q): command %+v has an empty Text or Name", s, c)
			}
			if strings.Contains(c.Text, "\n") {
				t.Fatalf("Extract(%q): Text %q spans lines", s, c.Text)
			}
		}
	})
}
