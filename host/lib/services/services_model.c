#include "services_model.h"

#include <string.h>

#include "abi_copy.h"
#include "catalog.h"
#include "layout.h"
#include "options.h"

static uint64_t svc_model_tensor_count(const wex_model *model)
{
    return model ? model->count : 0;
}

static wex_status svc_model_tensor(const wex_model *model, uint64_t index,
                                   wex_tensor_info *info)
{
    wex_tensor_info full;
    const wex__tensor *t;

    if (model == NULL || info == NULL || index >= model->count)
        return WEX_ERR_INVALID;
    t = &model->tensors[index];
    memset(&full, 0, sizeof(full));
    full.dtype = t->dtype;
    full.ndim = t->ndim;
    full.name = t->name;
    full.shape = t->shape;
    wex__abi_out(info, &full, sizeof(full));
    return WEX_OK;
}

static wex_status svc_model_find(const wex_model *model, const char *name,
                                 uint64_t *index_p)
{
    int64_t index = model && name ? wex__model_find(model, name) : -1;

    if (index < 0)
        return WEX_ERR_INVALID;
    *index_p = (uint64_t)index;
    return WEX_OK;
}

/* The view lives inside a per-model slot so the pointer stays valid as
 * long as the model does. */
static const wex_options *svc_model_config(const wex_model *model)
{
    return model ? &model->config_view : NULL;
}

static const char *svc_model_architecture(const wex_model *model)
{
    return model ? model->architecture : NULL;
}

void wex__services_model_init(wex_host_services *s)
{
    s->model_tensor_count = svc_model_tensor_count;
    s->model_tensor = svc_model_tensor;
    s->model_find = svc_model_find;
    s->model_config = svc_model_config;
    s->model_architecture = svc_model_architecture;
    s->layout_set_coord = wex__layout_set_coord;
    s->layout_add_tensor = wex__layout_add_tensor;
    s->layout_add_piece = wex__layout_add_piece;
}
