// Package browsertest drives the dashboard in a real headless Chromium:
// the walks a user takes (retry a failed job, bulk-retry a selection while
// the page refreshes, live figures updated in place, a batch's progress,
// retry and cancel), the themes' contrast,
// and the capture of the overview that docs/dashboard.png holds
// (TestBrowserScreenshot; MERIDIAN_SCREENSHOT=path writes it).
//
// It is a module of its own, with a replace directive onto the repository
// root, so that chromedp and its protocol packages stay out of the
// library's module graph: users of github.com/meridianjobs/meridian never
// download them. CI runs it after the root module's tests:
//
//	cd dashboard/browsertest && go test -race -count=1 ./...
//
// # Chromium
//
// The tests look for chromium, chromium-browser or google-chrome on PATH
// (on Debian: apt-get install -y chromium). Without one they skip, or
// fail when CI=true. Each test starts its own headless browser with a
// user-data directory chromedp creates and owns; the test's cleanup waits
// for the browser process to exit, its leftover child processes to be
// killed and that directory to be removed before the test ends, so nothing
// writes into a directory being deleted.
package browsertest
