// This file is safe to edit. Once it exists it will not be overwritten

package restapi

import (
	"crypto/tls"
	"net/http"

	"github.com/go-openapi/errors"
	"github.com/go-openapi/runtime"
	"github.com/go-openapi/runtime/middleware"
	"github.com/stamen-dev/stamen/restapi/operations"
	"github.com/stamen-dev/stamen/restapi/operations/queues"
	"github.com/stamen-dev/stamen/restapi/operations/tasks"
	"github.com/stamen-dev/stamen/restapi/operations/workers"
)

//go:generate swagger generate server --target ../../main --name Stamen --spec ../swagger.yaml --model-package gen/models --principal any --exclude-main

func configureFlags(api *operations.StamenAPI) {
	// api.CommandLineOptionsGroups = []cmdutils.CommandLineOptionsGroup{ ... }
	_ = api
}

func configureAPI(api *operations.StamenAPI) http.Handler {
	// configure the api here
	api.ServeError = errors.ServeError

	// Set your custom logger if needed. Default one is log.Printf
	// Expected interface func(string, ...any)
	//
	// Example:
	// api.Logger = log.Printf

	api.UseSwaggerUI()
	// To continue using redoc as your UI, uncomment the following line
	// api.UseRedoc()

	api.JSONConsumer = runtime.JSONConsumer()

	api.JSONProducer = runtime.JSONProducer()

	if api.TasksAbortTaskHandler == nil {
		api.TasksAbortTaskHandler = tasks.AbortTaskHandlerFunc(func(params tasks.AbortTaskParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation tasks.AbortTask has not yet been implemented")
		})
	}
	if api.WorkersAddConsumerHandler == nil {
		api.WorkersAddConsumerHandler = workers.AddConsumerHandlerFunc(func(params workers.AddConsumerParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation workers.AddConsumer has not yet been implemented")
		})
	}
	if api.TasksApplyTaskHandler == nil {
		api.TasksApplyTaskHandler = tasks.ApplyTaskHandlerFunc(func(params tasks.ApplyTaskParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation tasks.ApplyTask has not yet been implemented")
		})
	}
	if api.TasksAsyncApplyTaskHandler == nil {
		api.TasksAsyncApplyTaskHandler = tasks.AsyncApplyTaskHandlerFunc(func(params tasks.AsyncApplyTaskParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation tasks.AsyncApplyTask has not yet been implemented")
		})
	}
	if api.WorkersAutoscaleWorkerPoolHandler == nil {
		api.WorkersAutoscaleWorkerPoolHandler = workers.AutoscaleWorkerPoolHandlerFunc(func(params workers.AutoscaleWorkerPoolParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation workers.AutoscaleWorkerPool has not yet been implemented")
		})
	}
	if api.WorkersCancelConsumerHandler == nil {
		api.WorkersCancelConsumerHandler = workers.CancelConsumerHandlerFunc(func(params workers.CancelConsumerParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation workers.CancelConsumer has not yet been implemented")
		})
	}
	if api.QueuesGetQueueLengthsHandler == nil {
		api.QueuesGetQueueLengthsHandler = queues.GetQueueLengthsHandlerFunc(func(params queues.GetQueueLengthsParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation queues.GetQueueLengths has not yet been implemented")
		})
	}
	if api.TasksGetTaskInfoHandler == nil {
		api.TasksGetTaskInfoHandler = tasks.GetTaskInfoHandlerFunc(func(params tasks.GetTaskInfoParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation tasks.GetTaskInfo has not yet been implemented")
		})
	}
	if api.TasksGetTaskResultHandler == nil {
		api.TasksGetTaskResultHandler = tasks.GetTaskResultHandlerFunc(func(params tasks.GetTaskResultParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation tasks.GetTaskResult has not yet been implemented")
		})
	}
	if api.WorkersGrowWorkerPoolHandler == nil {
		api.WorkersGrowWorkerPoolHandler = workers.GrowWorkerPoolHandlerFunc(func(params workers.GrowWorkerPoolParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation workers.GrowWorkerPool has not yet been implemented")
		})
	}
	if api.TasksListTaskTypesHandler == nil {
		api.TasksListTaskTypesHandler = tasks.ListTaskTypesHandlerFunc(func(params tasks.ListTaskTypesParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation tasks.ListTaskTypes has not yet been implemented")
		})
	}
	if api.TasksListTasksHandler == nil {
		api.TasksListTasksHandler = tasks.ListTasksHandlerFunc(func(params tasks.ListTasksParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation tasks.ListTasks has not yet been implemented")
		})
	}
	if api.WorkersListWorkersHandler == nil {
		api.WorkersListWorkersHandler = workers.ListWorkersHandlerFunc(func(params workers.ListWorkersParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation workers.ListWorkers has not yet been implemented")
		})
	}
	if api.WorkersRestartWorkerPoolHandler == nil {
		api.WorkersRestartWorkerPoolHandler = workers.RestartWorkerPoolHandlerFunc(func(params workers.RestartWorkerPoolParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation workers.RestartWorkerPool has not yet been implemented")
		})
	}
	if api.TasksRevokeTaskHandler == nil {
		api.TasksRevokeTaskHandler = tasks.RevokeTaskHandlerFunc(func(params tasks.RevokeTaskParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation tasks.RevokeTask has not yet been implemented")
		})
	}
	if api.TasksSendTaskHandler == nil {
		api.TasksSendTaskHandler = tasks.SendTaskHandlerFunc(func(params tasks.SendTaskParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation tasks.SendTask has not yet been implemented")
		})
	}
	if api.TasksSetTaskRateLimitHandler == nil {
		api.TasksSetTaskRateLimitHandler = tasks.SetTaskRateLimitHandlerFunc(func(params tasks.SetTaskRateLimitParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation tasks.SetTaskRateLimit has not yet been implemented")
		})
	}
	if api.TasksSetTaskTimeoutHandler == nil {
		api.TasksSetTaskTimeoutHandler = tasks.SetTaskTimeoutHandlerFunc(func(params tasks.SetTaskTimeoutParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation tasks.SetTaskTimeout has not yet been implemented")
		})
	}
	if api.WorkersShrinkWorkerPoolHandler == nil {
		api.WorkersShrinkWorkerPoolHandler = workers.ShrinkWorkerPoolHandlerFunc(func(params workers.ShrinkWorkerPoolParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation workers.ShrinkWorkerPool has not yet been implemented")
		})
	}
	if api.WorkersShutdownWorkerHandler == nil {
		api.WorkersShutdownWorkerHandler = workers.ShutdownWorkerHandlerFunc(func(params workers.ShutdownWorkerParams, principal any) middleware.Responder {
			_ = params
			_ = principal

			return middleware.NotImplemented("operation workers.ShutdownWorker has not yet been implemented")
		})
	}

	api.PreServerShutdown = func() {}

	api.ServerShutdown = func() {}

	return setupGlobalMiddleware(api.Serve(setupMiddlewares))
}

// The TLS configuration before HTTPS server starts.
func configureTLS(tlsConfig *tls.Config) {
	// Make all necessary changes to the TLS configuration here.
	_ = tlsConfig
}

// As soon as server is initialized but not run yet, this function will be called.
// If you need to modify a config, store server instance to stop it individually later, this is the place.
// This function can be called multiple times, depending on the number of serving schemes.
// scheme value will be set accordingly: "http", "https" or "unix".
func configureServer(server *http.Server, scheme, addr string) {
	_ = server
	_ = scheme
	_ = addr
}

// The middleware configuration is for the handler executors. These do not apply to the swagger.json document.
// The middleware executes after routing but before authentication, binding and validation.
func setupMiddlewares(handler http.Handler) http.Handler {
	return handler
}

// The middleware configuration happens before anything, this middleware also applies to serving the swagger.json document.
// So this is a good place to plug in a panic handling middleware, logging and metrics.
func setupGlobalMiddleware(handler http.Handler) http.Handler {
	return handler
}
