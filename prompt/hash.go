package prompt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// InputHash is the SHA-256, in hex, of a call's arguments in canonical
// form (JSON without insignificant white space; the text as it is if it is
// not JSON). An approval keeps the hash of the input it showed; the call
// runs only if its arguments hash the same.
func InputHash(arguments string) string {
	var b bytes.Buffer
	data := []byte(arguments)
	if err := json.Compact(&b, data); err == nil {
		data = b.Bytes()
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
