package taskmeta

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TagNotifyURL is the task tag naming an address to which each of the
// task's state changes is posted (steps.NotifyURLAllowed says which the
// operator allows).
const TagNotifyURL = "tesk.notify_url"

// NotifyURLOf is the notification URL a task's tags name; "" for none.
func NotifyURLOf(meta metav1.ObjectMeta) string { return TagsOf(meta)[TagNotifyURL] }
