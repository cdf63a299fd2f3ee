/* Model catalogs for the command (tool_model.h): model/catalog.h. */
#include <string.h>

#include "catalog.h"
#include "tool_model.h"

wex_status wex_tool_model_load(const char *config_path, wex_model **model_p)
{
    return wex__model_load(config_path, model_p);
}

void wex_tool_model_free(wex_model *model)
{
    wex__model_free(model);
}

void wex_tool_model_get_info(const wex_model *model, wex_tool_model_info *info)
{
    info->architecture = model->architecture;
    info->count = model->count;
    info->total_bytes = model->total_bytes;
    info->total_elements = model->total_elements;
}

void wex_tool_model_tensor(const wex_model *model, uint64_t index,
                           wex_tool_tensor *tensor)
{
    const wex__tensor *t = &model->tensors[index];

    memset(tensor, 0, sizeof(*tensor));
    tensor->name = t->name;
    tensor->dtype = t->dtype;
    tensor->ndim = t->ndim;
    memcpy(tensor->shape, t->shape, t->ndim * sizeof(t->shape[0]));
    tensor->bytes = t->bytes;
    tensor->elements = wex__tensor_elements(t);
}
