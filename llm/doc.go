// Package llm is Tollgate's model: it adapts prompt.Model to the OpenAI
// chat-completions API, so one binary talks to OpenAI, OpenRouter, Ollama
// (http://localhost:11434/v1), llama.cpp's server or vLLM by changing the
// base URL. It is the only package that knows the API's wire format.
//
// Tool names are encoded for the API with WireName and decoded with
// ToolName; a name the model invents is passed through unchanged, so the
// core answers it with "unknown tool". Tool call arguments are passed
// through exactly as the model wrote them, valid JSON or not: the core
// turns bad arguments into an error result the model can correct.
//
// Each attempt is bounded by Config.Timeout. 408, 409, 429, 5xx answers,
// network errors and timeouts are retried with exponential backoff (or the
// delay a Retry-After header asks for) up to Config.MaxRetries times; other
// answers fail at once. Errors are *Error values whose message tells a
// user what to check.
//
// A Model is safe for concurrent use: it holds no state between calls.
package llm
