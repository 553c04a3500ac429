package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// WebhookBody is the JSON body Webhook posts. Text is what a
// Slack-compatible incoming webhook displays; the other fields are for
// receivers that parse them.
type WebhookBody struct {
	Text   string    `json:"text"`
	Queue  string    `json:"queue"`
	Kind   Kind      `json:"kind"`
	Firing bool      `json:"firing"`
	Value  float64   `json:"value"`
	Limit  float64   `json:"limit"`
	At     time.Time `json:"at"`
}

// Webhook returns a Hook that POSTs the alert as JSON (WebhookBody) to
// url with client (http.DefaultClient when nil). A response other than
// 2xx is an error.
func Webhook(url string, client *http.Client) Hook {
	if client == nil {
		client = http.DefaultClient
	}
	return func(ctx context.Context, a Alert) error {
		body, err := json.Marshal(WebhookBody{Text: a.Text(), Queue: a.Queue, Kind: a.Kind, Firing: a.Firing, Value: a.Value, Limit: a.Limit, At: a.At})
		if err != nil {
			return fmt.Errorf("alert: encoding the webhook body: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("alert: building the webhook request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("alert: posting the webhook: %w", err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("alert: the webhook answered %s", resp.Status)
		}
		return nil
	}
}
